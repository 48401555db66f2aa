/*
 * tls_conn_api.h - TEMPORARY copy of the "TLS sessions" declarations of conn.h on branch
 * conn-split (0af9750), so tls.c builds before that branch is merged. Deleted at the merge
 * (conn.h declares them), together with the weak placeholders at the end of tls.c.
 */
#ifndef SW_TLS_CONN_API_H
#define SW_TLS_CONN_API_H

#include "common.h"

#include <sys/types.h>

typedef uint32_t sw_conn_ref;
enum {
    SW_CONN_TLS_PARTIAL = 1,
    SW_CONN_TLS_NO_EDIT = 2,
};
enum sw_conn_role { SW_ROLE_SERVER = 1, SW_ROLE_CLIENT = 2 };
sw_conn_ref sw_conn_tls_open(int fd, int role);
void sw_conn_tls_set_fd(sw_conn_ref ref, int fd);
void sw_conn_tls_enter(sw_conn_ref ref);
void sw_conn_tls_leave(void);
void sw_conn_tls_read(sw_conn_ref ref, const void *buf, long r, int err);
typedef long (*sw_conn_tls_write_fn)(void *ctx, const void *buf, size_t len);
long sw_conn_tls_write(sw_conn_ref ref, const void *buf, size_t len, int flags,
                       sw_conn_tls_write_fn fn, void *ctx);
void sw_conn_tls_close(sw_conn_ref ref);

#endif
