#!/usr/bin/env python3
"""memcached_client.py PORT - text-protocol clients against a real memcached: pymemcache
(set/get/get_many/delete/incr/add/cas/touch, a miss, an error) and a raw socket sending a
pipeline with noreply, a multi-get and a meta get in one write. Prints every reply (repr) and,
last, "COMMANDS <n>": the commands sent."""
import socket
import sys

from pymemcache.client.base import Client

port = int(sys.argv[1])
out = []
n = 0
c = Client(("127.0.0.1", port))
out.append(c.set("k1", b"v1", noreply=False)); n += 1
out.append(c.get("k1")); n += 1
out.append(c.get("missing")); n += 1
out.append(c.set("n", b"10", noreply=False)); n += 1
out.append(c.incr("n", 5)); n += 1
out.append(c.add("k1", b"x", noreply=False)); n += 1
out.append(sorted(c.get_many(["k1", "n", "nope"]).items())); n += 1
v, cas = c.gets("k1"); n += 1
out.append(v)
out.append(c.cas("k1", b"v2", cas, noreply=False)); n += 1
out.append(c.touch("k1", 100, noreply=False)); n += 1
out.append(c.delete("k1", noreply=False)); n += 1
out.append(c.set("big", b"y" * 100000, noreply=False)); n += 1
out.append(len(c.get("big"))); n += 1
n += 1
try:
    c.incr("big", 1)
except Exception as e:  # CLIENT_ERROR: not a number
    out.append(type(e).__name__)
c.close()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"set a 0 0 2 noreply\r\nAA\r\nset b 0 0 3\r\nBBB\r\nget a b\r\n"
          b"mg a v\r\nbogus\r\nmn\r\n")
n += 6
want = b"MN\r\n"
buf = b""
while not buf.endswith(want):
    d = s.recv(65536)
    if not d:
        break
    buf += d
out.append(buf)
s.close()
for x in out:
    print(repr(x))
print("COMMANDS %d" % n)
