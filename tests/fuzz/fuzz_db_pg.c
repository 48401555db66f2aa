/* fuzz_db_pg.c - libFuzzer target for agent/proto_pg.c (harness: fuzz_db.h). */
#include "common.h"

#include "proto_pg.h"

#define FZ_STATE struct sw_pg
#define FZ_RESET(st, opt) sw_pg_reset((st), (opt))
#define FZ_FEED(st, dir, b, n, ev) sw_pg_feed((st), (enum sw_db_dir)(dir), (b), (n), (ev))
#include "../fuzz/fuzz_db.h"
