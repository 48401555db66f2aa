#!/usr/bin/env python3
"""redis_client.py PORT|SOCKET DB - python3-redis against a real server: single commands,
pipelines (plain and MULTI/EXEC), errors, binary keys and values, a 1 MB value, pub/sub.
Prints every reply (repr) so that a traced and an untraced run can be compared byte for byte."""
import sys
import threading

import redis

target, db = sys.argv[1], int(sys.argv[2])
if target.isdigit():
    r = redis.Redis(host="127.0.0.1", port=int(target), db=db)
else:
    r = redis.Redis(unix_socket_path=target, db=db)
out = []
out.append(r.flushdb())
out.append(r.set("k", "v"))
out.append(r.get("k"))
out.append(r.get("missing"))
try:
    r.incr("k")
except redis.ResponseError as e:
    out.append("error: %s" % e)
out.append(r.set(b"bin\x00\xff\r\nkey", b"\x00\x01\r\n$3\r\n"))
out.append(r.get(b"bin\x00\xff\r\nkey"))
big = b"x" * (1 << 20)
out.append(r.set("big", big))
out.append(r.get("big") == big)
# a plain pipeline: 40 commands in one write, replies in one read
p = r.pipeline(transaction=False)
for i in range(20):
    p.set("p%d" % i, i)
    p.get("p%d" % i)
out.append(p.execute())
# MULTI/EXEC
p = r.pipeline(transaction=True)
p.incr("ctr")
p.lpush("l", "a", "b")
p.lrange("l", 0, -1)
out.append(p.execute())
# an error inside a pipeline
p = r.pipeline(transaction=False)
p.set("s", "x")
p.incr("s")
p.get("s")
out.append(p.execute(raise_on_error=False))
out.append(sorted(r.hgetall("nohash").items()))
# pub/sub: a subscriber connection receives what another publishes
ps = r.pubsub()
ps.subscribe("ch1", "ch2")
got = []
for _ in range(2):
    got.append(ps.get_message(timeout=5))
out.append([(m["type"], m["channel"]) for m in got if m])
out.append(r.publish("ch1", "hello"))
m = None
for _ in range(50):
    m = ps.get_message(timeout=0.2)
    if m and m["type"] == "message":
        break
out.append((m["type"], m["channel"], m["data"]) if m else None)
ps.ping()
m = ps.get_message(timeout=5)
out.append(m["type"] if m else None)
ps.unsubscribe()
for _ in range(2):
    ps.get_message(timeout=5)
ps.close()
out.append(r.ping())
for x in out:
    print(repr(x))
