#!/usr/bin/env python3
"""Test server for the preload tests (loopback only, port chosen by the kernel).

Modes:
  http  - HTTP/1.1 keep-alive server; every response body is the request head exactly as
          received (bytes), followed by "\n--body-md5: <md5>", "\n--body-len: <n>" and
          "\n--body-sum: <byte sum mod 2^32>" lines describing the request body.
  raw   - echoes raw TCP bytes back until the peer closes.
Prints "PORT <n>" on its first line of stdout, then serves until killed (or --max-seconds).
Usage: echo_server.py [MODE [MAX_SECONDS [UNIX_SOCKET_PATH]]]: with a path it listens on that
Unix-domain stream socket instead (and prints "PORT 1").
"""
import hashlib
import socket
import sys
import threading
import time


def read_head(conn, buf):
    while b"\r\n\r\n" not in buf and b"\n\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    i = buf.find(b"\r\n\r\n")
    j = buf.find(b"\n\n")
    if i < 0 or (0 <= j < i):
        end = j + 2
    else:
        end = i + 4
    return buf[:end], buf[end:]


def serve_http(conn):
    buf = b""
    try:
        while True:
            head, buf = read_head(conn, buf)
            if head is None:
                return
            clen = 0
            for line in head.split(b"\n")[1:]:
                if line.lower().startswith(b"content-length:"):
                    clen = int(line.split(b":", 1)[1].strip())
            while len(buf) < clen:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            body, buf = buf[:clen], buf[clen:]
            out = (head + b"\n--body-md5: " + hashlib.md5(body).hexdigest().encode()
                   + b"\n--body-len: " + str(len(body)).encode()
                   + b"\n--body-sum: " + str(sum(body) & 0xffffffff).encode() + b"\n")
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                         + str(len(out)).encode() + b"\r\n\r\n" + out)
    except OSError:
        pass
    finally:
        conn.close()


def serve_raw(conn):
    try:
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            conn.sendall(chunk)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "http"
    max_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    if len(sys.argv) > 3:
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(sys.argv[3])
        port = 1
    else:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", 0))
        port = ls.getsockname()[1]
    ls.listen(64)
    ls.settimeout(0.5)
    print("PORT %d" % port, flush=True)
    handler = serve_http if mode == "http" else serve_raw
    deadline = time.time() + max_seconds
    while time.time() < deadline:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            continue
        conn.settimeout(30)
        threading.Thread(target=handler, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
