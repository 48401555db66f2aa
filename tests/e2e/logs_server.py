# logs_server.py - the logs tests' server (tests/e2e/logs.sh): answers every GET with "ok" and
# writes to its stdout/stderr with print(..., flush=True) or os.write (both end in write(2)),
# so both runs (with and without the agent) write exactly the same bytes:
#   /r<N>    one line "req /r<N> <N>" on stdout, and "err /r<N>" on stderr (print)
#   /big     a line of 1 MiB + 17 bytes ("B" * ..., then a newline) on stdout
#   /bin     256 bytes 0..255 then a newline, on stdout
#   /split   one line in three writes: "part-one " "part-two " "part-three\n"
#   /tail    "no newline ever" on stdout (the last thing it writes)
#   /par<N>  "a <N>", then 0.3 s later "b <N>" on stdout (requests served in parallel, one
#            thread each: each line must carry its own request's ids)
# The port goes to the file named by argv[1]; a line "started" goes to stdout before any request.
import http.server, os, sys, time

def out(b):
    os.write(1, b)

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        p = self.path
        if p.startswith("/r"):
            print("req %s %s" % (p, p[2:]), flush=True)
            print("err %s" % p, file=sys.stderr, flush=True)
        elif p == "/big":
            out(b"B" * (1024 * 1024 + 17) + b"\n")
        elif p == "/bin":
            out(bytes(range(256)) + b"\n")
        elif p == "/split":
            out(b"part-one ")
            out(b"part-two ")
            out(b"part-three\n")
        elif p.startswith("/par"):
            out(b"a %s\n" % p[4:].encode())
            time.sleep(0.3)
            out(b"b %s\n" % p[4:].encode())
        elif p == "/tail":
            out(b"no newline ever")
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")

s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
out(b"started\n")
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % s.server_address[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
