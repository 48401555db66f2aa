#!/usr/bin/env python3
"""meter_server.py - the traced server of the meter tests (tests/e2e/meters.sh,
tests/oap/oap_meters.sh): 2 idle threads besides its main one, ~64 MiB resident;
GET /spin?s=N spins a thread for N seconds (answered at once), any other GET answers "ok".
Prints "PORT <n>" once listening on a free loopback port."""
import http.server, threading, time
ballast = bytearray(64 << 20)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1
ev = threading.Event()
for _ in range(2):
    threading.Thread(target=ev.wait, daemon=True).start()
def spin(s):
    end = time.time() + s
    while time.time() < end:
        pass
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.startswith("/spin"):
            threading.Thread(target=spin, args=(float(self.path.split("=")[1]),), daemon=True).start()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("PORT %d" % s.server_address[1], flush=True)
s.serve_forever()
