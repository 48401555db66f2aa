/*
 * test_id.c - ids: the Java-like format, uniqueness over 1e6 ids from several threads, and a
 * new process uuid after fork.
 */
#include "common.h"

#include "id.h"
#include "propagation.h"

#include "check.h"

#include <pthread.h>
#include <regex.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define PER_THREAD 250000

static char (*ids)[SW_ID_STR_MAX];

static void *gen(void *arg)
{
    size_t base = (size_t)(uintptr_t)arg * PER_THREAD;
    for (size_t i = 0; i < PER_THREAD; i++)
        CHECK(sw_id_new(ids[base + i], SW_ID_STR_MAX) > 0);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_format(void)
{
    regex_t re;
    char id[SW_ID_STR_MAX];
    CHECK(regcomp(&re, "^[0-9a-f]{32}\\.[1-9][0-9]*\\.[1-9][0-9]{15,18}$", REG_EXTENDED) == 0);
    sw_id_init();
    size_t n = sw_id_new(id, sizeof(id));
    CHECK_EQ(n, strlen(id));
    CHECK(regexec(&re, id, 0, NULL, 0) == 0);
    CHECK(strncmp(id, sw_id_process_uuid(), SW_ID_UUID_LEN) == 0);
    CHECK_EQ(strlen(sw_id_process_uuid()), SW_ID_UUID_LEN);
    CHECK(SW_ID_STR_MAX <= SW_ID_MAX);
    /* The tid part is this thread's kernel tid. */
    char tid[24];
    snprintf(tid, sizeof(tid), ".%ld.", (long)gettid());
    CHECK(strstr(id, tid) != NULL);
    /* Too small a buffer. */
    CHECK_EQ(sw_id_new(id, 10), 0);
    regfree(&re);
}

static void test_unique_threads(void)
{
    pthread_t th[THREADS];
    ids = calloc((size_t)THREADS * PER_THREAD, SW_ID_STR_MAX);
    CHECK(ids != NULL);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, gen, (void *)(uintptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    qsort(ids, (size_t)THREADS * PER_THREAD, SW_ID_STR_MAX, cmp);
    for (size_t i = 1; i < (size_t)THREADS * PER_THREAD; i++)
        CHECK(strcmp(ids[i - 1], ids[i]) != 0);
    free(ids);
}

static void test_fork_new_uuid(void)
{
    int p[2];
    char parent[SW_ID_UUID_LEN + 1], child[SW_ID_UUID_LEN + 1] = {0};
    memcpy(parent, sw_id_process_uuid(), sizeof(parent));
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sw_id_reset_after_fork();
        char id[SW_ID_STR_MAX];
        sw_id_new(id, sizeof(id));
        if (strncmp(id, sw_id_process_uuid(), SW_ID_UUID_LEN) != 0)
            _exit(2);
        ssize_t w = write(p[1], sw_id_process_uuid(), SW_ID_UUID_LEN);
        _exit(w == SW_ID_UUID_LEN ? 0 : 1);
    }
    close(p[1]);
    CHECK_EQ(read(p[0], child, SW_ID_UUID_LEN), SW_ID_UUID_LEN);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(strcmp(parent, child) != 0);
    close(p[0]);
}

int main(void)
{
    RUN_TEST(test_format);
    RUN_TEST(test_unique_threads);
    RUN_TEST(test_fork_new_uuid);
    return 0;
}
