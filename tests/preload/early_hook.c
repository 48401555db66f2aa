/*
 * early_hook.c - a library whose constructor makes hooked calls (pipe I/O, socket, close)
 * before libswagent.so's own constructor may have run (libfaketime's constructor test). It
 * reports "early-hook-ok" on stderr when every call behaved.
 */
#define _GNU_SOURCE 1
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

__attribute__((constructor)) static void early_hook(void)
{
    int p[2];
    char c = 0;
    if (pipe(p) != 0)
        return;
    int ok = write(p[1], "x", 1) == 1 && read(p[0], &c, 1) == 1 && c == 'x';
    ok = ok && close(p[0]) == 0 && close(p[1]) == 0;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ok = ok && s >= 0 && close(s) == 0;
    if (ok)
        (void)!write(2, "early-hook-ok\n", 14);
}
