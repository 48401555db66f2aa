/*
 * profile.h (reporter) - trace profiling in swagent-reporter (docs/profiling.md): polls
 * ProfileTask/getProfileTaskCommands per traced service every
 * collector.get_profile_task_interval, checks each task, writes the running one into the
 * service's task page (agent/profile.h), turns the application's raw samples
 * (SW_REC_PROF_SAMPLE, SW_REC_PROF_MAPS ring records) into ThreadSnapshots (symbolised here with
 * libdwfl, never in the application), streams them with collectSnapshot and calls
 * reportTaskFinish when a task ends.
 *
 * Rules: runs only in swagent-reporter, on its one thread; ring records are untrusted input.
 */
#ifndef SW_REPORTER_PROFILE_H
#define SW_REPORTER_PROFILE_H

#include "common.h"

struct sw_config;
struct sw_transport;
struct sw_ring_meta;
struct sw_drain_info;

/* Starts profiling for the reporter of runtime directory `dir` (NULL when profile.active is
 * off). */
struct sw_rprof *sw_rprof_new(const struct sw_config *c, const char *dir);

/* Frees everything (task pages stay; a running task is left to run out in the applications). */
void sw_rprof_free(struct sw_rprof *p);

/*
 * One ring record that is not a segment (main.c's batch loop). `ring_id`/`cursor` name it, so a
 * record handed out again after a failed batch is not counted twice.
 */
void sw_rprof_record(struct sw_rprof *p, uint64_t ring_id, uint64_t cursor,
                     const struct sw_ring_meta *meta, uint16_t type, const void *payload,
                     uint32_t len);

/* Polls, starts and ends tasks, sends snapshots and task ends (main.c, each pass). */
void sw_rprof_tick(struct sw_rprof *p, struct sw_transport *t, const struct sw_drain_info *info,
                   int ninfo);

#endif /* SW_REPORTER_PROFILE_H */
