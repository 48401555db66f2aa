#!/usr/bin/env python3
"""rawclient.py PORT REQUEST_FILE: sends the file's bytes to 127.0.0.1:PORT in ONE send call
(pipelined requests, odd headers, binary bytes), then copies everything the server answers to
stdout until the server closes the connection (so the last request should say
`Connection: close`). Bounded: 20 s overall."""
import socket
import sys
import time

port = int(sys.argv[1])
with open(sys.argv[2], "rb") as f:
    data = f.read()
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(data)
deadline = time.time() + 20
out = sys.stdout.buffer
while time.time() < deadline:
    chunk = s.recv(65536)
    if not chunk:
        break
    out.write(chunk)
out.flush()
s.close()
