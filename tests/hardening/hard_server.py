#!/usr/bin/env python3
"""Test server for the hardening tests (loopback, kernel-chosen port, run under the agent).

Each connection is HTTP/1.x when its first bytes are "<METHOD> <target> HTTP/1.": requests
are read line by line and body bytes are discarded as they arrive (the server itself keeps
O(1) memory, so RSS growth is the agent's). Every response is 200 with a body of
"head-md5 <md5 of the head without sw8* lines> sw8 <number of sw8: lines> body <body bytes>".
Any other connection is echoed back byte for byte (TLS, HTTP/2, Redis, PostgreSQL, binary).
Prints "PORT <n>" first, then serves until killed or --max-seconds pass.
"""
import hashlib
import re
import socket
import sys
import threading
import time

HTTP1 = re.compile(rb"^[A-Z]+ [^ ]+ HTTP/1\.[01]\r?\n")


def recv_line(conn, buf, limit=1 << 20):
    """One line (with its LF) from buf + the socket; None at EOF. Longer lines are cut."""
    while b"\n" not in buf:
        if len(buf) > limit:
            line, buf = buf, b""
            return line, buf
        chunk = conn.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    i = buf.index(b"\n") + 1
    return buf[:i], buf[i:]


def serve_http(conn, buf):
    while True:
        md5 = hashlib.md5()
        sw8 = 0
        clen = 0
        chunked = False
        line, buf = recv_line(conn, buf)
        if line is None:
            return
        md5.update(line)
        while True:
            line, buf = recv_line(conn, buf)
            if line is None:
                return
            low = line.lower()
            if low.startswith(b"sw8:"):
                sw8 += 1
            if not low.startswith(b"sw8"):
                md5.update(line)
            if low.startswith(b"content-length:"):
                clen = int(line.split(b":", 1)[1].strip() or b"0")
            if low.startswith(b"transfer-encoding:") and b"chunked" in low:
                chunked = True
            if line in (b"\r\n", b"\n"):
                break
        got = 0
        if chunked:
            while True:
                line, buf = recv_line(conn, buf)
                if line is None:
                    return
                n = int(line.split(b";")[0].strip() or b"0", 16)
                while len(buf) < n + 2:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                got += n
                buf = buf[n + 2:]
                if n == 0:
                    break
        else:
            while got < clen:
                if not buf:
                    buf = conn.recv(65536)
                    if not buf:
                        return
                take = min(len(buf), clen - got)
                got += take
                buf = buf[take:]
        out = b"head-md5 %s sw8 %d body %d\n" % (md5.hexdigest().encode(), sw8, got)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(out), out))


def serve(conn):
    try:
        buf = b""
        while len(buf) < 64 and b"\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
        if HTTP1.match(buf):
            serve_http(conn, buf)
            return
        conn.sendall(buf)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return
            conn.sendall(chunk)
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


def main():
    max_seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    ls.settimeout(0.5)
    print("PORT %d" % ls.getsockname()[1], flush=True)
    deadline = time.time() + max_seconds
    while time.time() < deadline:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            continue
        conn.settimeout(60)
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
