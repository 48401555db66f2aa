/*
 * test_procs.c - the reporter's process table (agent/reporter/procs.c): every segment looks its
 * process up, so a lookup must cost a few probes however many processes the table remembers.
 */
#include "check.h"
#include "procs.h"

#include <stdlib.h>

static struct sw_procs t; /* large: static, zeroed */

/* A full table of processes whose rings are tracked (live), looked up round-robin, as a
 * reporter draining many live processes does. */
static void test_lookups_are_constant(void)
{
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < SW_PROCS_MAX; i++) {
        struct sw_pstat *p =
            sw_procs_get(&t, 1000 + i, 1700000000000ull + (uint64_t)i * 7, "svc", "inst", 1);
        CHECK(p != NULL);
        p->has_ring = true;
        p->sent = (uint64_t)i;
    }
    CHECK_EQ(t.n, SW_PROCS_MAX);
    t.probes = 0;
    for (int round = 0; round < 10; round++)
        for (int i = 0; i < SW_PROCS_MAX; i++) {
            struct sw_pstat *p =
                sw_procs_get(&t, 1000 + i, 1700000000000ull + (uint64_t)i * 7, "svc", "inst", 2);
            CHECK(p != NULL);
            CHECK_EQ(p->pid, 1000 + i);
            CHECK_EQ(p->sent, i);
        }
    double per = (double)t.probes / (10.0 * SW_PROCS_MAX);
    printf("  %d processes: %.2f entries compared per lookup\n", SW_PROCS_MAX, per);
    /* A scan of the table costs 512 on average; the cache one to four. */
    CHECK(per < 4.0);
}

/* The reporter's usual pattern: one live process's segments, the table full of exited ones. */
static void test_one_live_among_exited(void)
{
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < SW_PROCS_MAX - 1; i++)
        CHECK(sw_procs_get(&t, 5000 + i, 42, "old", "x", (uint64_t)i) != NULL);
    struct sw_pstat *live = sw_procs_get(&t, 77, 99, "svc", "inst", 5000);
    live->has_ring = true;
    t.probes = 0;
    for (int k = 0; k < 100000; k++)
        CHECK(sw_procs_get(&t, 77, 99, "svc", "inst", 5001) == live);
    printf("  one live process among %d exited: %llu entries compared in 100000 lookups\n",
           SW_PROCS_MAX - 1, (unsigned long long)t.probes);
    CHECK(t.probes <= 4 * 100000); /* a scan: 1,024 each */
}

/* A full table evicts the exited process touched longest ago; a cache slot left pointing at the
 * reused entry never returns the wrong process. */
static void test_eviction(void)
{
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < SW_PROCS_MAX; i++) {
        struct sw_pstat *p = sw_procs_get(&t, 100 + i, 1, "s", "i", 10 + (uint64_t)i);
        p->sent = 1;
        p->has_ring = (i % 2) == 1; /* odd pids keep a ring: never evicted */
    }
    /* pid 100 (touched at 10) is the oldest exited: the new process takes its entry. */
    struct sw_pstat *n = sw_procs_get(&t, 9999, 5, "new", "i", 5000);
    CHECK(n != NULL);
    CHECK_EQ(n->sent, 0);
    CHECK_EQ(t.n, SW_PROCS_MAX);
    CHECK(n == &t.ps[0]);
    /* pid 100 comes back: a new, zeroed entry (the oldest exited one now: pid 102). */
    struct sw_pstat *back = sw_procs_get(&t, 100, 1, "s", "i", 5001);
    CHECK(back != n);
    CHECK_EQ(back->pid, 100);
    CHECK_EQ(back->sent, 0);
    CHECK(back == &t.ps[2]);
    CHECK(sw_procs_get(&t, 9999, 5, "new", "i", 5002) == n);
    /* pid 102 was evicted: looking it up must not return pid 100's entry through its slot. */
    struct sw_pstat *p102 = sw_procs_get(&t, 102, 1, "s", "i", 5003);
    CHECK_EQ(p102->pid, 102);
    CHECK_EQ(p102->sent, 0);
    CHECK(p102 != back);
    /* Every entry with a ring kept its counters. */
    for (int i = 1; i < SW_PROCS_MAX; i += 2)
        CHECK_EQ(sw_procs_get(&t, 100 + i, 1, "s", "i", 6000)->sent, 1);
    /* Only processes with rings left to evict: none is. */
    for (int i = 0; i < SW_PROCS_MAX; i++)
        t.ps[i].has_ring = true;
    CHECK(sw_procs_get(&t, 424242, 1, "s", "i", 7000) == NULL);
}

int main(void)
{
    RUN_TEST(test_lookups_are_constant);
    RUN_TEST(test_one_live_among_exited);
    RUN_TEST(test_eviction);
    return 0;
}
