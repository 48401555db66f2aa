#!/usr/bin/env python3
"""badproto_server.py MODE PORTFILE - a fake PostgreSQL or memcached server for badinput.sh that
misbehaves after a good start; writes its port to PORTFILE, then serves each connection:
  pg-cut      the startup answered as a real server does (trust), then for the first Query a
              RowDescription and half a DataRow, and the connection closed;
  pg-garbage  the same startup, then bytes that are not the protocol (an HTTP status line);
  mc-cut      for the first command, half a retrieval reply (VALUE k 0 10 + 3 bytes), closed;
  mc-garbage  for the first command, an HTTP status line."""
import os
import socket
import struct
import sys
import threading

mode, portfile = sys.argv[1], sys.argv[2]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)


def msg(t, body):
    return t + struct.pack("!I", len(body) + 4) + body


def recv_n(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b


def pg(c):
    while True:  # SSLRequest / GSSENCRequest: 'N', then the StartupMessage
        n = struct.unpack("!I", recv_n(c, 4))[0]
        body = recv_n(c, n - 4)
        code = struct.unpack("!I", body[:4])[0]
        if code in (80877103, 80877104):
            c.sendall(b"N")
            continue
        break
    out = msg(b"R", struct.pack("!I", 0))
    for k, v in ((b"server_version", b"15.0"), (b"client_encoding", b"UTF8"),
                 (b"standard_conforming_strings", b"on"), (b"DateStyle", b"ISO, MDY"),
                 (b"integer_datetimes", b"on")):
        out += msg(b"S", k + b"\0" + v + b"\0")
    out += msg(b"K", struct.pack("!II", 1, 2)) + msg(b"Z", b"I")
    c.sendall(out)
    t = recv_n(c, 1)
    n = struct.unpack("!I", recv_n(c, 4))[0]
    recv_n(c, n - 4)
    if t != b"Q":
        return
    if mode == "pg-cut":
        col = b"a\0" + struct.pack("!IhIhih", 0, 0, 25, -1, -1, 0)
        row = msg(b"D", struct.pack("!hI", 1, 10) + b"0123456789")
        c.sendall(msg(b"T", struct.pack("!h", 1) + col) + row[: len(row) // 2])
    else:
        c.sendall(b"HTTP/1.1 200 OK\r\n\r\n")


def mc(c):
    line = b""
    while not line.endswith(b"\r\n"):
        d = c.recv(4096)
        if not d:
            return
        line += d
    c.sendall(b"VALUE k 0 10\r\nabc" if mode == "mc-cut" else b"HTTP/1.1 200 OK\r\n\r\n")


def serve(c):
    try:
        (pg if mode.startswith("pg") else mc)(c)
    except (EOFError, OSError):
        pass
    c.close()


while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
