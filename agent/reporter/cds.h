/*
 * cds.h - the reporter's side of OAP's ConfigurationDiscoveryService (CDS): every
 * collector.get_agent_dynamic_config_interval seconds it asks OAP for the configuration of each
 * service whose processes report through it, with the UUID of the answer it last applied, and
 * publishes the keys it supports into the shared block (svcblock.h) of every instance of that
 * service on the host, where the traced processes read them on their next request.
 *
 * Keys (the Java agent's runtime keys that swagent has): agent.sample_n_per_3_secs,
 * agent.ignore_suffix and agent.span_limit_per_segment. A key the answer lacks returns to each
 * process's agent.config value; a bad value (the file's rules: not an integer, out of range, too
 * many or too long list items) is logged and ignored (the key keeps what it had); a key swagent
 * does not know or cannot change at runtime is logged once per answer and ignored; an answer that
 * does not parse is logged and changes nothing. The same UUID as the last applied answer: nothing
 * to do (OAP then sends no command at all).
 *
 * Rules: runs only in swagent-reporter, in its single-threaded loop (the call is synchronous,
 * under the management backoff of the transport).
 */
#ifndef SW_CDS_H
#define SW_CDS_H

#include "common.h"

struct sw_config;
struct sw_transport;
struct sw_drain_info;
struct sw_cds;

/* A CDS client for the rings of `runtime_dir`. NULL when out of memory. */
struct sw_cds *sw_cds_new(const struct sw_config *cfg, const char *runtime_dir);

void sw_cds_free(struct sw_cds *c);

/*
 * Called on every pass of the reporter's loop with the rings it serves: asks OAP for each
 * service whose interval is over (none when cfg->cds_interval is 0), and publishes the current
 * configuration to the block of an instance seen for the first time.
 */
void sw_cds_tick(struct sw_cds *c, struct sw_transport *t, const struct sw_drain_info *info, int n,
                 uint64_t now_ms);

/*
 * Applies a packed Commands answer for `service` (exposed for tests and the fuzzer): returns 1
 * when the configuration changed and was published, 0 when nothing changed, -EBADMSG when it
 * does not parse.
 */
int sw_cds_apply(struct sw_cds *c, const char *service, const uint8_t *p, size_t n,
                 uint64_t now_ms);

#endif /* SW_CDS_H */
