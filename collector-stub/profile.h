/*
 * profile.h - collector-stub's ProfileTask service and its `profile` view (docs/profiling.md).
 *
 *   --profile-task SPEC  a task to hand out, SPEC = comma-separated Command args (KEY=VALUE:
 *                        EndpointName, MinDurationThreshold, DumpPeriod, MaxSamplingCount,
 *                        Duration, StartTime, CreateTime, TaskId, SerialNumber), plus
 *                        service=NAME (only that service gets it) and start=+MS (StartTime is
 *                        the stub's start plus MS). Unset args get OAP-like defaults; any arg
 *                        may be set to a bad value on purpose (tests of the agent's checks).
 *   --profile FILE       one JSON line per ThreadSnapshot and per poll / task finish.
 *   collector-stub profile FILE [--segment ID]   the profile tree(s) of the snapshots in FILE,
 *                        as the SkyWalking UI analyses them (ProfileAnalyzer).
 *
 * Answers follow OAP's ProfileTaskServiceHandler: a poll gets the tasks of its service whose
 * CreateTime is after the poll's lastCommandTime.
 */
#ifndef SW_STUB_PROFILE_H
#define SW_STUB_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Adds a task from SPEC. Returns 0, or -1 with a message on stderr. */
int sw_stub_prof_add(const char *spec);

/*
 * getProfileTaskCommands: parses the query (logged to `out` when not NULL) and packs the answer
 * (Commands) into a malloc'ed *reply. Returns 0, or -1 when the query does not parse.
 */
int sw_stub_prof_poll(const uint8_t *data, size_t len, FILE *out, uint8_t **reply,
                      size_t *reply_len);

/* collectSnapshot (one message) and reportTaskFinish: one JSON line each. 0 or -1. */
int sw_stub_prof_snapshot(const uint8_t *data, size_t len, FILE *out);
int sw_stub_prof_finish(const uint8_t *data, size_t len, FILE *out);

/* `collector-stub profile FILE [--segment ID]`. */
int sw_stub_profile_main(int argc, char **argv);

#endif /* SW_STUB_PROFILE_H */
