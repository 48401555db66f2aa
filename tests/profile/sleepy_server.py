# sleepy_server.py - the trace profiling tests' Python server (tests/profile/profile.sh python):
# http.server whose GET /sleep sleeps 300 ms in time.sleep (clock_nanosleep in C) before it
# answers; anything else answers at once. Prints "PORT n" once listening.
import http.server
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        if self.path == "/sleep":
            time.sleep(0.3)
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print("PORT %d" % srv.server_address[1], flush=True)
srv.serve_forever()
