# python_server.py - an HTTP server traced by SkyWalking's own Python agent (PyPI
# apache-skywalking, pinned by tests/interop/requirements-python.txt; NOT under LD_PRELOAD).
# The agent's plugins do the tracing: sw_http_server (http.server's BaseHTTPRequestHandler: the
# entry span, reading sw8) and sw_urllib_request (urllib.request: the exit span, writing sw8).
# Each GET is forwarded with urllib.request to http://127.0.0.1:$BACKEND_PORT<same path> and the
# backend's status and body are relayed. Prints "PORT n" once listening on 127.0.0.1
# (kernel-chosen port).
# Environment: SW_AGENT_NAME, SW_AGENT_INSTANCE_NAME, SW_AGENT_COLLECTOR_BACKEND_SERVICES and the
# other SW_AGENT_* switches (read by the agent itself), BACKEND_PORT.
import os
import signal
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from skywalking import agent

agent.start()

BACKEND = int(os.environ['BACKEND_PORT'])


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def do_GET(self):
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{BACKEND}{self.path}', timeout=10) as up:
                status, body = up.status, up.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        except OSError as e:
            status, body = 502, str(e).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write('python_server: ' + (fmt % args) + '\n')


def stop(signum, frame):
    # Deliver what is queued (agent.stop() reports the segment queue), then leave.
    agent.stop()
    os._exit(0)


signal.signal(signal.SIGTERM, stop)
server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
print(f'PORT {server.server_address[1]}', flush=True)
server.serve_forever()
