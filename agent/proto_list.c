/*
 * proto_list.c - the protocol modules of the connection layer (proto.h), in the order their
 * claim() and sniff() are asked. The last one is the default: a TCP connection no module
 * claims is its. Add a module with one line above the default.
 */
#include "common.h"

#include "proto.h"
#include "proto_dbmod.h"
#include "proto_h2.h"
#include "proto_http1.h"

/* Issue 36: MySQL / MariaDB clients (proto_mysql.c), FastCGI both sides (proto_fcgi.c). */
extern const struct sw_proto sw_proto_mysql SW_HIDDEN;
extern const struct sw_proto sw_proto_fcgi SW_HIDDEN;

const struct sw_proto *const sw_protos[] = {
    &sw_proto_redis, /* proto_db.c: Redis clients */
    &sw_proto_pg,    /* proto_db.c: PostgreSQL clients */
    &sw_proto_mc,    /* proto_db.c: memcached clients */
    &sw_proto_mysql, /* proto_mysql.c: MySQL / MariaDB clients */
    &sw_proto_fcgi,  /* proto_fcgi.c: FastCGI servers (PHP-FPM) and clients (nginx) */
    &sw_proto_h2,    /* proto_h2.c: HTTP/2 and gRPC, by the client preface (and adoption) */
    &sw_proto_http1, /* the default: keep it last */
};
const unsigned sw_protos_n = SW_ARRAY_LEN(sw_protos);
