/*
 * proto_dbmod.h - the database and cache client modules of the connection layer (proto_db.c):
 * Redis, PostgreSQL and memcached, for proto_list.c.
 */
#ifndef SW_PROTO_DBMOD_H
#define SW_PROTO_DBMOD_H

#include "common.h"

struct sw_config;
struct sw_proto;

/* The switches and limits from the configuration (swagent.trace_redis, ...); once at start,
 * before any connection (sw_conn_init). cfg may be NULL (defaults). */
void sw_dbproto_init(const struct sw_config *cfg);

extern const struct sw_proto sw_proto_redis SW_HIDDEN;
extern const struct sw_proto sw_proto_pg SW_HIDDEN;
extern const struct sw_proto sw_proto_mc SW_HIDDEN;

#endif /* SW_PROTO_DBMOD_H */
