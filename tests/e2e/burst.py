#!/usr/bin/env python3
"""burst.py PORT N [PATH]: N plain GET requests (HTTP/1.1, each on a new connection, so that the
kernel spreads them over a server's workers), all inside one 3-second sampling window: waits for
the next window boundary (the agent's windows are epoch ms // 3000), sends them, prints the
first and last start times (epoch ms). Exit 3 when the burst crossed into the next window
(the caller tries again), 1 when a request did not get its 200."""
import socket, sys, time

port, n = int(sys.argv[1]), int(sys.argv[2])
path = sys.argv[3] if len(sys.argv) > 3 else "/"
ms = lambda: int(time.time() * 1000)
m = ms() % 3000
if m > 200:
    time.sleep((3000 - m + 30) / 1000)
t0 = ms()
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET %s?i=%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (path.encode(), i))
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    if not data.startswith(b"HTTP/1.1 200") and not data.startswith(b"HTTP/1.0 200"):
        print("request %d: %r" % (i, data[:80]), file=sys.stderr)
        sys.exit(1)
t1 = ms()
print("%d %d" % (t0, t1))
sys.exit(3 if t0 // 3000 != t1 // 3000 else 0)
