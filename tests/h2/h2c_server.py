#!/usr/bin/python3
"""h2c_server.py - a cleartext HTTP/2 server that also takes "Upgrade: h2c" (RFC 7540 3.2),
with Debian's python3-h2 on plain sockets (one thread per connection), for the HTTP/2 tests.
nghttpd and nginx take only prior knowledge; curl --http2 and nghttp -u on http:// upgrade.

  h2c_server.py [LOG]   listens on 127.0.0.1:<kernel-chosen port>, prints "PORT n"; answers
                        every request 200 "hi <path>\\n"; appends each request's path and sw8
                        header (or "-") to LOG.
"""
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events

LOG = sys.argv[1] if len(sys.argv) > 1 else None
log_lock = threading.Lock()


def note(path, headers):
    if not LOG:
        return
    sw8 = headers.get(b"sw8", b"-")
    with log_lock, open(LOG, "ab") as f:
        f.write(path + b" " + sw8 + b"\n")


def answer(conn, sid, path):
    body = b"hi " + path + b"\n"
    conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body))),
                            ("content-type", "text/plain")])
    conn.send_data(sid, body, end_stream=True)


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        b = sock.recv(65536)
        if not b:
            return None, b""
        data += b
    head, rest = data.split(b"\r\n\r\n", 1)
    return head, rest


def serve(sock):
    cfg = h2.config.H2Configuration(client_side=False)
    conn = h2.connection.H2Connection(config=cfg)
    first = sock.recv(24, socket.MSG_PEEK)
    rest = b""
    if first.startswith(b"PRI * HTTP/2.0"):
        conn.initiate_connection()
    else:
        head, rest = read_head(sock)
        if head is None:
            return
        lines = head.split(b"\r\n")
        method, path, _ = lines[0].split(b" ", 2)
        hdrs = {}
        for l in lines[1:]:
            k, v = l.split(b":", 1)
            hdrs[k.strip().lower()] = v.strip()
        if hdrs.get(b"upgrade", b"").lower() != b"h2c":
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            return
        note(path, hdrs)
        sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                     b"Upgrade: h2c\r\n\r\n")
        conn.initiate_upgrade_connection(hdrs[b"http2-settings"])
        answer(conn, 1, path)
    sock.sendall(conn.data_to_send())
    while True:
        data = rest or sock.recv(65536)
        rest = b""
        if not data:
            return
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                h = dict(ev.headers)
                path = h.get(b":path", b"?")
                note(path, h)
                answer(conn, ev.stream_id, path)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                sock.sendall(conn.data_to_send())
                return
        out = conn.data_to_send()
        if out:
            sock.sendall(out)


def handle(sock):
    try:
        serve(sock)
    except Exception as e:  # noqa: BLE001 - a test server: say it and go on
        print("connection error: %r" % e, file=sys.stderr, flush=True)
    finally:
        sock.close()


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    print("PORT %d" % ls.getsockname()[1], flush=True)
    while True:
        s, _ = ls.accept()
        threading.Thread(target=handle, args=(s,), daemon=True).start()


if __name__ == "__main__":
    main()
