/* fuzz_db_redis.c - libFuzzer target for agent/proto_redis.c (harness: fuzz_db.h). */
#include "common.h"

#include "proto_redis.h"

#define FZ_STATE struct sw_redis
#define FZ_RESET(st, opt) ((void)(opt), sw_redis_init(NULL), sw_redis_reset(st))
#define FZ_FEED(st, dir, b, n, ev) sw_redis_feed((st), (enum sw_db_dir)(dir), (b), (n), (ev))
#include "../fuzz/fuzz_db.h"
