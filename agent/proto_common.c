/*
 * proto_common.c - see proto_common.h.
 */
#include "common.h"

#include "log.h"
#include "proto_common.h"
#include "trace.h"

#include <string.h>

#define GIVE_UP_LOG_EVERY_MS 1000

static _Atomic int64_t g_logged_ms = -GIVE_UP_LOG_EVERY_MS; /* the last line's time */
static _Atomic uint64_t g_quiet;                            /* give-ups not logged since */

void sw_proto_give_up(struct sw_conn *c, const char *why, int64_t *t)
{
    sw_conn_stop(c);
    sw_conn_count(SW_CNT_GIVEN_UP);
    sw_trace_count_given_up();
    int64_t now = sw_conn_now(t);
    int64_t last = sw_atomic_load_relaxed(&g_logged_ms);
    if (now - last < GIVE_UP_LOG_EVERY_MS ||
        !atomic_compare_exchange_strong_explicit(&g_logged_ms, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed)) {
        sw_atomic_add_relaxed(&g_quiet, 1);
        return;
    }
    uint64_t quiet = atomic_exchange_explicit(&g_quiet, 0, memory_order_relaxed);
    const char *name = c->proto < sw_protos_n ? sw_protos[c->proto]->name : "?";
    if (!why)
        why = "framing lost";
    size_t nl = strlen(name);
    if (strncmp(why, name, nl) == 0 && why[nl] == ':' && why[nl + 1] == ' ')
        why += nl + 2; /* the parser's message names its protocol too */
    SW_LOGW("%s: %.*s: %s: connection no longer followed (its bytes pass untouched; counted as "
            "given_up in `swagent status`; %llu more since the last such line)",
            name, (int)c->peer_len, c->peer, why, (unsigned long long)quiet);
}

void sw_proto_feed_iov(struct sw_conn *c, const struct iovec *iov, int iovcnt, size_t r, int64_t *t,
                       sw_proto_bytes_fn feed, bool dir)
{
    for (int i = 0; i < iovcnt && r > 0; i++) {
        size_t n = iov[i].iov_len < r ? iov[i].iov_len : r;
        feed(c, dir, iov[i].iov_base, n, t);
        r -= n;
    }
}
