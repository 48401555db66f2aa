/* fuzz_db_memcached.c - libFuzzer target for agent/proto_memcached.c (harness: fuzz_db.h). */
#include "common.h"

#include "proto_memcached.h"

#define FZ_STATE struct sw_mc
#define FZ_RESET(st, opt) ((void)(opt), sw_mc_reset(st))
#define FZ_FEED(st, dir, b, n, ev) sw_mc_feed((st), (enum sw_db_dir)(dir), (b), (n), (ev))
#include "../fuzz/fuzz_db.h"
