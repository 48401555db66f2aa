/*
 * svcgc.h - removing per-service shared blocks (svcblock.h) no process uses any more.
 *
 * A block is made by the first traced process of a (service, instance) and is never removed by
 * the processes (one of them cannot know it is the last). The default instance name is random
 * per separately started program, so without a collector a host running many short traced
 * programs (scripts calling curl, CGI) would gather a 4 KiB file per run in the runtime
 * directory, a tmpfs. The reporter removes a block when
 *   - it is at least `min_age_s` old (ctime: a block just made is not yet mapped by its maker),
 *   - it is a valid block (sw_svc_open_file; a file that is not is left alone, as the processes
 *     leave it), and
 *   - no process maps it: every /proc/<pid>/maps is read and its (device, inode) looked for. A
 *     traced process of our uid whose maps cannot be read (made non-dumpable) might map it: then
 *     nothing is removed in that pass. "Traced" is having a ring in the directory: a process
 *     attaches its block at its first sampling decision and makes its ring at its first record,
 *     so one that could map a block and has no ring is one that never recorded anything. (An
 *     unreadable process with no ring would otherwise stop every pass: in containers the init
 *     process of the host's namespace often cannot be read, even by root.)
 * What remains open: a process opening a block by name between the scan of /proc and the
 * unlink maps a removed file, and the next process of that instance makes a new one (two
 * quotas for that instance until those processes end). Only processes given the same
 * agent.instance_name open an existing block by name (forked children inherit the mapping), and
 * the window is the time of one scan.
 */
#ifndef SW_REPORTER_SVCGC_H
#define SW_REPORTER_SVCGC_H

#include <stdint.h>

struct sw_svcgc_result {
    int candidates; /* valid blocks old enough */
    int removed;    /* of those, unlinked: no process maps them */
    int in_use;     /* of those, mapped by a process */
    int unsure;     /* processes of our uid whose maps could not be read (nothing removed) */
};

/*
 * One pass over runtime directory `dir` (see above). `proc` is the procfs root ("/proc"; tests
 * may point elsewhere). Returns 0 or -errno (the directory or /proc could not be read).
 */
int sw_svcgc_run(const char *dir, const char *proc, uint32_t min_age_s,
                 struct sw_svcgc_result *out);

#endif /* SW_REPORTER_SVCGC_H */
