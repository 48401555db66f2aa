#!/usr/bin/env python3
"""badinput_client.py PORT KEY [TIMES [HOLDFILE]] - sends GET KEY as RESP (a KEY of "mc:K": the
memcached text command "get K"), prints every byte received (repr) until the server closes; TIMES connections one after the other (default 1),
the last one 1.2 s after the others; then, with HOLDFILE, stays alive until that file exists
(at most 30 s), so that `swagent status` sees this process live."""
import os
import socket
import sys
import time

port, k = int(sys.argv[1]), sys.argv[2].encode()
times = int(sys.argv[3]) if len(sys.argv) > 3 else 1
for i in range(times):
    if times > 1 and i == times - 1:
        time.sleep(1.2)
    s = socket.create_connection(("127.0.0.1", port))
    if k.startswith(b"mc:"):
        s.sendall(b"get %s\r\n" % k[3:])
    else:
        s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k))
    out = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        out += d
    s.close()
    print(repr(out), flush=True)
if len(sys.argv) > 4:
    for _ in range(300):
        if os.path.exists(sys.argv[4]):
            break
        time.sleep(0.1)
