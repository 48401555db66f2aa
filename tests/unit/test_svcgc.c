/*
 * test_svcgc.c - the reporter's removal of per-service shared blocks no process maps
 * (agent/reporter/svcgc.c), against the real /proc: a block mapped by a live child stays, an
 * unmapped one goes, a file named like a block that is not one stays, a block younger than the
 * minimum age stays; the child gone, its block goes too. A procfs root with a process of our uid
 * whose maps cannot be read and that has a ring: nothing is removed; with no ring it does not
 * count.
 */
#include "common.h"

#include "svcblock.h"
#include "svcgc.h"

#include "check.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

static char g_dir[256];

static bool exists(const char *service, const char *instance)
{
    char name[32], path[512];
    struct stat st;
    sw_svc_name(service, instance, name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%s", g_dir, name);
    return stat(path, &st) == 0;
}

static void make_block(const char *service, const char *instance)
{
    struct sw_svc *b = NULL;
    CHECK_EQ(sw_svc_open(g_dir, service, instance, true, &b), 0);
    sw_svc_close(b);
}

int main(void)
{
    snprintf(g_dir, sizeof(g_dir), "/tmp/sw-svcgc-XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);

    make_block("svcA", "i1");
    make_block("svcB", "i2");
    make_block("svcC", "i3");
    /* Named like a block, not one: left alone. */
    char junk[512];
    snprintf(junk, sizeof(junk), "%s/svc-0123456789abcdef.sws", g_dir);
    int fd = open(junk, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, "garbage", 7), 7);
    close(fd);

    /* A child maps svcA's block and waits. */
    int go[2], done[2];
    CHECK_EQ(pipe(go), 0);
    CHECK_EQ(pipe(done), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(done[1]);
        close(go[0]);
        struct sw_svc *b = NULL;
        if (sw_svc_open(g_dir, "svcA", "i1", false, &b) != 0)
            _exit(2);
        char ch = 1;
        if (write(go[1], &ch, 1) != 1 || read(done[0], &ch, 1) < 0)
            _exit(3);
        _exit(0);
    }
    close(done[0]);
    close(go[1]);
    char ch;
    CHECK_EQ(read(go[0], &ch, 1), 1);

    struct sw_svcgc_result r;
    /* Too young for an hour's minimum: nothing even looked at. */
    CHECK_EQ(sw_svcgc_run(g_dir, "/proc", 3600, &r), 0);
    CHECK_EQ(r.candidates, 0);
    CHECK(exists("svcB", "i2"));

    /* A procfs with a process of our uid whose maps cannot be read: nothing removed. */
    char fake[512], p[600];
    snprintf(fake, sizeof(fake), "%s-proc", g_dir);
    CHECK_EQ(mkdir(fake, 0700), 0);
    snprintf(p, sizeof(p), "%s/4242", fake);
    CHECK_EQ(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/4242/maps", fake);
    CHECK_EQ(symlink("maps", p), 0); /* ELOOP: unreadable, even for root */
    snprintf(p, sizeof(p), "%s/4242/status", fake);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fprintf(f, "Name:\tx\nUid:\t%u\t%u\t%u\t%u\n", (unsigned)geteuid(), (unsigned)geteuid(),
            (unsigned)geteuid(), (unsigned)geteuid());
    fclose(f);
    /* With a ring of that pid in the directory, it is a traced process that might map them. */
    char ring[512];
    snprintf(ring, sizeof(ring), "%s/ring-4242-0123abcd.swr", g_dir);
    fd = open(ring, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK_EQ(sw_svcgc_run(g_dir, fake, 0, &r), 0);
    CHECK_EQ(r.candidates, 3);
    CHECK_EQ(r.unsure, 1);
    CHECK_EQ(r.removed, 0);
    CHECK_EQ(unlink(ring), 0);
    /* With no ring it is not counted (a readable fake process maps all three here, so that
     * nothing is removed from the fake procfs's point of view). */
    snprintf(p, sizeof(p), "%s/4243", fake);
    CHECK_EQ(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/4243/maps", fake);
    f = fopen(p, "w");
    CHECK(f != NULL);
    const char *svcs[3][2] = {{"svcA", "i1"}, {"svcB", "i2"}, {"svcC", "i3"}};
    for (int i = 0; i < 3; i++) {
        char name[32], bp[600];
        struct stat st;
        sw_svc_name(svcs[i][0], svcs[i][1], name, sizeof(name));
        snprintf(bp, sizeof(bp), "%s/%s", g_dir, name);
        CHECK_EQ(stat(bp, &st), 0);
        fprintf(f, "7f0000000000-7f0000001000 rw-s 00000000 %02x:%02x %llu %s\n", major(st.st_dev),
                minor(st.st_dev), (unsigned long long)st.st_ino, bp);
    }
    fclose(f);
    CHECK_EQ(sw_svcgc_run(g_dir, fake, 0, &r), 0);
    CHECK_EQ(r.unsure, 0);
    CHECK_EQ(r.in_use, 3);
    CHECK_EQ(r.removed, 0);
    CHECK(exists("svcB", "i2") && exists("svcC", "i3"));

    /* The real /proc: B and C go, A (mapped by the child) and the junk stay. */
    CHECK_EQ(sw_svcgc_run(g_dir, "/proc", 0, &r), 0);
    CHECK_EQ(r.candidates, 3);
    CHECK_EQ(r.in_use, 1);
    CHECK_EQ(r.removed, 2);
    CHECK(exists("svcA", "i1"));
    CHECK(!exists("svcB", "i2") && !exists("svcC", "i3"));
    CHECK(access(junk, F_OK) == 0);

    /* The child gone: A goes. */
    CHECK_EQ(write(done[1], &ch, 1), 1);
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_EQ(sw_svcgc_run(g_dir, "/proc", 0, &r), 0);
    CHECK_EQ(r.candidates, 1);
    CHECK_EQ(r.removed, 1);
    CHECK(!exists("svcA", "i1"));
    CHECK(access(junk, F_OK) == 0);

    unlink(junk);
    rmdir(g_dir);
    snprintf(p, sizeof(p), "%s/4242/maps", fake);
    unlink(p);
    snprintf(p, sizeof(p), "%s/4242/status", fake);
    unlink(p);
    snprintf(p, sizeof(p), "%s/4243/maps", fake);
    unlink(p);
    snprintf(p, sizeof(p), "%s/4242", fake);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/4243", fake);
    rmdir(p);
    rmdir(fake);
    printf("test_svcgc: ok\n");
    return 0;
}
