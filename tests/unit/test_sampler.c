/*
 * test_sampler.c - N traces per 3-second window: exact counts, forced samples, window reset,
 * and exactness under 8 threads.
 */
#include "common.h"

#include "sampler.h"

#include "check.h"

#include <pthread.h>

static void test_all_when_not_positive(void)
{
    struct sw_sampler s = SW_SAMPLER_INIT;
    for (int i = 0; i < 1000; i++) {
        CHECK(sw_sampler_try(&s, -1, 1000));
        CHECK(sw_sampler_try(&s, 0, 1000));
    }
    CHECK_EQ(sw_sampler_count(&s, 1000), 0);
}

static void test_n_per_window(void)
{
    struct sw_sampler s = SW_SAMPLER_INIT;
    int64_t t = INT64_C(3000) * 574855963; /* a window start (epoch ms in 2024) */
    CHECK(sw_sampler_try(&s, 2, t));
    CHECK(sw_sampler_try(&s, 2, t + 10));
    CHECK(!sw_sampler_try(&s, 2, t + 20));
    CHECK(!sw_sampler_try(&s, 2, t + 2999));
    CHECK_EQ(sw_sampler_count(&s, t), 2);
    /* The next window starts a new budget. */
    CHECK(sw_sampler_try(&s, 2, t + 3000));
    CHECK(sw_sampler_try(&s, 2, t + 3001));
    CHECK(!sw_sampler_try(&s, 2, t + 5999));
    /* Far in the future, and a clock that stepped back, also reset. */
    CHECK(sw_sampler_try(&s, 2, t + 1000000));
    CHECK(sw_sampler_try(&s, 2, t - 100000));
    CHECK(sw_sampler_try(&s, 2, t - 100000));
    CHECK(!sw_sampler_try(&s, 2, t - 100000));
    sw_sampler_reset(&s);
    CHECK_EQ(sw_sampler_count(&s, t - 100000), 0);
}

static void test_forced_counts(void)
{
    struct sw_sampler s = SW_SAMPLER_INIT;
    int64_t t = 3000 * 1000;
    sw_sampler_force(&s, t);
    sw_sampler_force(&s, t);
    sw_sampler_force(&s, t);
    CHECK_EQ(sw_sampler_count(&s, t), 3); /* forced samples go past N */
    CHECK(!sw_sampler_try(&s, 2, t + 1)); /* ... and use up the local budget */
    sw_sampler_force(&s, t + 3000);       /* a forced sample opens a new window too */
    CHECK(sw_sampler_try(&s, 2, t + 3001));
    CHECK(!sw_sampler_try(&s, 2, t + 3002));
    CHECK_EQ(sw_sampler_count(&s, t + 3002), 2);
}

#define THREADS 8
#define TRIES 20000

static struct sw_sampler shared = SW_SAMPLER_INIT;
static _Atomic int granted;
static _Atomic int start_flag;

static void *worker(void *arg)
{
    int n = *(int *)arg;
    while (!atomic_load(&start_flag))
        ;
    for (int i = 0; i < TRIES; i++)
        if (sw_sampler_try(&shared, n, 6000 + i % 3000))
            atomic_fetch_add(&granted, 1);
    return NULL;
}

static void test_threads_exact(void)
{
    pthread_t th[THREADS];
    int ns[] = {1, 7, 500, 100000};
    for (size_t k = 0; k < SW_ARRAY_LEN(ns); k++) {
        sw_sampler_reset(&shared);
        atomic_store(&granted, 0);
        atomic_store(&start_flag, 0);
        for (int i = 0; i < THREADS; i++)
            CHECK(pthread_create(&th[i], NULL, worker, &ns[k]) == 0);
        atomic_store(&start_flag, 1);
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        int expect = ns[k] < THREADS * TRIES ? ns[k] : THREADS * TRIES;
        CHECK_EQ(atomic_load(&granted), expect);
    }
}

int main(void)
{
    RUN_TEST(test_all_when_not_positive);
    RUN_TEST(test_n_per_window);
    RUN_TEST(test_forced_counts);
    RUN_TEST(test_threads_exact);
    return 0;
}
