#!/usr/bin/env python3
"""interleave_client.py PORT N CONC METHOD PREFIX...: an untraced load client for
interleave.sh. Sends N requests to 127.0.0.1:PORT, CONC at a time (one thread each, every
thread on its own keep-alive connection, reconnecting when the server closes it). Request i goes
to PREFIX[i % len(PREFIX)] + "?id=<tag>-<i>" (tag: METHOD and CONC, so ids are unique across
runs); METHOD POST sends a body of 1 to 3000 bytes. Checks every answer (status 200, the
backend's echo of the same target and body length) and prints "ok N" or the first errors;
exit status 1 on any error."""
import http.client
import queue
import random
import sys
import threading

port, n, conc, method = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
prefixes = sys.argv[5:]
jobs = queue.Queue()
for i in range(n):
    jobs.put(i)
errors = []
lock = threading.Lock()


def worker():
    conn = None
    while True:
        try:
            i = jobs.get_nowait()
        except queue.Empty:
            break
        target = "%s?id=%s%d-%d" % (prefixes[i % len(prefixes)], method, conc, i)
        body = b"x" * random.randint(1, 3000) if method == "POST" else None
        for attempt in range(2):
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
                conn.request(method, target, body=body)
                r = conn.getresponse()
                got = r.read().decode(errors="replace")
                want = "%s %d\n" % (target, len(body) if body else 0)
                if r.status != 200 or got != want:
                    with lock:
                        errors.append("%s: %d %r" % (target, r.status, got))
                if r.will_close:
                    conn.close()
                    conn = None
                break
            except (OSError, http.client.HTTPException) as e:
                if conn:
                    conn.close()
                conn = None
                if attempt == 1:
                    with lock:
                        errors.append("%s: %r" % (target, e))


threads = [threading.Thread(target=worker) for _ in range(conc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    print("errors %d: %s" % (len(errors), "; ".join(errors[:5])))
    sys.exit(1)
print("ok %d" % n)
