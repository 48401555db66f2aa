/*
 * fake_trace.h - a fake trace module for the connection layer's unit tests (test_conn.c,
 * test_proto.c): handles, counters and the last request's captures, no segments. Include
 * once, in the test's one translation unit.
 */
#ifndef SW_TEST_FAKE_TRACE_H
#define SW_TEST_FAKE_TRACE_H

#include "check.h"
#include "guard.h"
#include "trace.h"

#include <string.h>

/* ---- fake trace module ---------------------------------------------------------------------- */

#define INJ "sw8: 1-VEVTVA==-U0VH-1-c3Zj-aW5zdA==-L3Rlc3Q=-aG9zdDo4MA==\r\n"

/* gRPC spans (proto_h2.c): the latest name given (sw_trace_span_rpc, or an exit's rpc_op),
 * and the ends with a gRPC status. */
static int n_rpc_named, n_rpc_finish, n_rpc_error, last_rpc_status;
static char last_rpc_op[256];
static int n_exit_start, n_exit_finish, n_exit_error, n_entry_start, n_entry_finish, n_entry_abort;
static int last_status;
static char last_peer[256], last_target[256], last_method[32], last_sw8[256], last_host[256],
    last_corr[256];
static int n_unguarded; /* trace calls made without the re-entrancy guard held */
/* Handles of recorded spans: slots from SW_TRACE_SPAN_SLOTS on (see trace.h). */
static uint64_t next_handle = SW_TRACE_SPAN_SLOTS;
static bool entry_unrecorded; /* the next entries record nothing (sw_trace_entry_unrecorded) */
static bool entry_keepable;   /* ... and are keepable (SW_TRACE_KEEP_BIT) */
static int n_respond, last_respond_status; /* sw_trace_entry_respond calls (kept at >= 500) */
static uint64_t next_unrecorded = 1;
static _Atomic int n_now; /* clock reads (test_pool_threads reads the clock on four threads) */
static bool inject_enabled = true;

int sw_trace_init(const struct sw_config *cfg)
{
    (void)cfg;
    return 0;
}
void sw_trace_after_fork(void)
{
}
static void copy_str(char *dst, size_t cap, const char *s, size_t n)
{
    if (!s)
        n = 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, s, n);
    dst[n] = 0;
}
uint64_t sw_trace_entry_start(const struct sw_req_info *req, int64_t start_ms)
{
    errno = ENOSYS; /* as a real trace module may (see trace.h) */
    (void)start_ms;
    n_unguarded += sw_guard_depth == 0;
    n_entry_start++;
    copy_str(last_host, sizeof(last_host), req->host, req->host_len);
    copy_str(last_corr, sizeof(last_corr), req->correlation, req->correlation_len);
    copy_str(last_peer, sizeof(last_peer), req->peer, req->peer_len);
    copy_str(last_target, sizeof(last_target), req->target, req->target_len);
    copy_str(last_method, sizeof(last_method), req->method, req->method_len);
    copy_str(last_sw8, sizeof(last_sw8), req->sw8, req->sw8_len);
    if (entry_unrecorded && entry_keepable)
        return next_handle++ | SW_TRACE_KEEP_BIT;
    if (entry_unrecorded) {
        uint64_t h = next_unrecorded++ % SW_TRACE_SPAN_SLOTS;
        return h ? h : next_unrecorded++;
    }
    return next_handle++;
}
void sw_trace_entry_finish(uint64_t h, int status_code, int64_t end_ms)
{
    errno = ENOSYS; /* as a real trace module may (see trace.h) */
    (void)h, (void)end_ms;
    n_unguarded += sw_guard_depth == 0;
    n_entry_finish++;
    last_status = status_code;
}
void sw_trace_entry_abort(uint64_t h, const char *k, const char *m, int64_t end_ms)
{
    (void)h, (void)k, (void)m, (void)end_ms;
    n_entry_abort++;
}
bool sw_trace_entry_respond(uint64_t h, int status, int64_t now_ms)
{
    (void)now_ms;
    CHECK(sw_trace_entry_keepable(h));
    n_unguarded += sw_guard_depth == 0;
    n_respond++;
    last_respond_status = status;
    return status >= 500;
}
uint64_t sw_trace_exit_start(const struct sw_req_info *req, int64_t start_ms, char *inject,
                             size_t cap, size_t *inject_len)
{
    (void)start_ms;
    n_exit_start++;
    if (req->rpc_op) {
        n_rpc_named++;
        copy_str(last_rpc_op, sizeof(last_rpc_op), req->rpc_op, req->rpc_op_len);
    }
    copy_str(last_peer, sizeof(last_peer), req->peer, req->peer_len);
    copy_str(last_target, sizeof(last_target), req->target, req->target_len);
    copy_str(last_method, sizeof(last_method), req->method, req->method_len);
    *inject_len = 0;
    if (inject_enabled && cap >= sizeof(INJ) - 1) {
        memcpy(inject, INJ, sizeof(INJ) - 1);
        *inject_len = sizeof(INJ) - 1;
    }
    return next_handle++;
}
/* The thread's request as the fake trace module tells it (test_attribution sets it), and the
 * parent the connection layer gave the latest exit. */
static uint64_t fake_request_now, last_parent;
uint64_t sw_trace_request_now(void)
{
    return fake_request_now;
}
uint64_t sw_trace_exit_start_in(uint64_t parent, const struct sw_req_info *req, int64_t start_ms,
                                char *inject, size_t cap, size_t *inject_len)
{
    last_parent = parent;
    return sw_trace_exit_start(req, start_ms, inject, cap, inject_len);
}
void sw_trace_exit_finish(uint64_t h, int status_code, int64_t end_ms)
{
    errno = ENOSYS; /* as a real trace module may (see trace.h) */
    (void)h, (void)end_ms;
    n_unguarded += sw_guard_depth == 0;
    n_exit_finish++;
    last_status = status_code;
}
void sw_trace_exit_error(uint64_t h, const char *k, const char *m, int64_t end_ms)
{
    (void)h, (void)k, (void)m, (void)end_ms;
    n_exit_error++;
}
void sw_trace_span_rpc(uint64_t h, const char *op, size_t opl)
{
    (void)h;
    n_rpc_named++;
    copy_str(last_rpc_op, sizeof(last_rpc_op), op, opl);
}
static int n_h2_ring[16]; /* sw_trace_count_h2 (the ring's HTTP/2 counters) */
void sw_trace_count_h2(int k)
{
    if (k >= 0 && k < 16)
        n_h2_ring[k]++;
}
void sw_trace_rpc_finish(uint64_t h, int status, const char *m, int64_t end_ms)
{
    (void)h, (void)m, (void)end_ms;
    n_unguarded += sw_guard_depth == 0;
    n_rpc_finish++;
    n_rpc_error += status != 0;
    last_rpc_status = status;
}
/* Database and cache exits (proto_db.c, reached through proto_list.c): not followed here. */
uint64_t sw_trace_db_start_in(uint64_t parent, const struct sw_db_info *info, int64_t start_ms)
{
    (void)parent, (void)info, (void)start_ms;
    return 0;
}
void sw_trace_db_finish(uint64_t h, const char *k, const char *m, int64_t end_ms)
{
    (void)h, (void)k, (void)m, (void)end_ms;
}
uint64_t sw_trace_current(void)
{
    return 0;
}
static int n_set_current;
__thread struct sw_trace_tls sw_trace_tls; /* sw_trace_touch (trace.h) reads `current` */
uint64_t sw_trace_set_current(uint64_t h)
{
    errno = ENOSYS; /* as a real trace module may (see trace.h) */
    n_unguarded += sw_guard_depth == 0;
    n_set_current++;
    uint64_t prev = sw_trace_tls.current;
    sw_trace_tls.current = h;
    return prev;
}
int64_t sw_trace_now_ms(void)
{
    atomic_fetch_add_explicit(&n_now, 1, memory_order_relaxed);
    return 1000;
}
void sw_trace_get_stats(struct sw_trace_stats *out)
{
    memset(out, 0, sizeof(*out));
}
/* The configuration protocol modules read (proto_mysql.c, proto_fcgi.c): none, their defaults. */
const struct sw_config *sw_trace_config(void)
{
    return NULL;
}

#endif /* SW_TEST_FAKE_TRACE_H */
