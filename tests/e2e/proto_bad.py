"""proto_bad.py - misbehaving servers for tests/e2e/mysql_fcgi_bad.sh (not traced).

  mysql-cut PORTFILE:  a MySQL server that greets, accepts any login, answers OK to every
                       command but a query "... FROM t": half a result set, then it closes.
  mysql-junk PORTFILE: a server that greets with bytes that are no MySQL greeting, then echoes.
  mysql-extra PORTFILE: a MySQL server whose OK to the login comes with a second packet that no
                       command asked for (the client fails on its sequence number).
  fcgi-cut PORTFILE:   a FastCGI server that reads a request and closes in the middle of its
                       STDOUT, with no END_REQUEST.
  fcgi-v2 PORTFILE:    a FastCGI server that answers a request with records of version 2.
  http-junk PORTFILE:  an HTTP/1.x server that answers a request head with a line that is not
                       HTTP ("SSH-2.0-..."), then waits for the client to close.
Each listens on 127.0.0.1:0, writes its port to PORTFILE and serves until killed.
"""
import socket
import struct
import sys
import threading


def pkt(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def greeting():
    caps = 0x000FF7FF | 0x01000000  # PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH, DEPRECATE_EOF
    caps &= ~0x00000800  # no SSL
    caps &= ~0x00000020  # no compression
    return pkt(0, b"\x0a" + b"10.11.99-fake\x00" + struct.pack("<I", 7) + b"abcdefgh\x00"
               + struct.pack("<H", caps & 0xFFFF) + b"\x2d" + b"\x02\x00"
               + struct.pack("<H", caps >> 16) + b"\x15" + b"\x00" * 10 + b"ijklmnopqrst\x00"
               + b"mysql_native_password\x00")


def read_packet(c):
    h = b""
    while len(h) < 4:
        d = c.recv(4 - len(h))
        if not d:
            return None
        h += d
    n = h[0] | h[1] << 8 | h[2] << 16
    p = b""
    while len(p) < n:
        d = c.recv(n - len(p))
        if not d:
            return None
        p += d
    return h[3], p


def mysql_cut(c):
    c.sendall(greeting())
    if read_packet(c) is None:
        return
    c.sendall(pkt(2, b"\x00\x00\x00\x02\x00\x00\x00"))
    while True:
        r = read_packet(c)
        if r is None:
            return
        seq, p = r
        if p[:1] == b"\x03" and b"FROM t" in p:
            # a result set header and one column definition, then the connection is gone
            c.sendall(pkt(1, b"\x01") + pkt(2, b"\x03def\x00\x00\x00\x01a\x01a\x0c\x3f\x00")[:9])
            return
        c.sendall(pkt(seq + 1, b"\x00\x00\x00\x02\x00\x00\x00"))


def mysql_junk(c):
    c.sendall(b"\x07\x00\x00\x00NOTSQL!\xff\xfe\x00garbage")
    while True:
        d = c.recv(4096)
        if not d:
            return
        c.sendall(d)


def mysql_extra(c):
    c.sendall(greeting())
    if read_packet(c) is None:
        return
    ok = b"\x00\x00\x00\x02\x00\x00\x00"
    c.sendall(pkt(2, ok) + pkt(3, ok))
    while read_packet(c) is not None:
        pass


def fcgi_request(c):
    """Reads one request (up to its empty STDIN record); returns its id, or None."""
    buf = b""
    while True:
        d = c.recv(65536)
        if not d:
            return
        buf += d
        # the request is complete once the empty STDIN record arrived
        i = 0
        done = False
        while i + 8 <= len(buf):
            t, rid, cl, pl = buf[i + 1], buf[i + 2] << 8 | buf[i + 3], buf[i + 4] << 8 | buf[i + 5], buf[i + 6]
            if i + 8 + cl + pl > len(buf):
                break
            if t == 5 and cl == 0:
                done = True
            i += 8 + cl + pl
        if done:
            return rid


def fcgi_cut(c):
    rid = fcgi_request(c)
    if rid is None:
        return
    body = b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nhalf of a respo"
    rec = bytes([1, 6, 0, rid & 255, 0, len(body), 0, 0]) + body
    c.sendall(rec[: len(rec) - 5])  # cut inside the record, no END_REQUEST


def fcgi_v2(c):
    rid = fcgi_request(c)
    if rid is None:
        return
    body = b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nversion two\n"
    c.sendall(bytes([2, 6, 0, rid & 255, 0, len(body), 0, 0]) + body
              + bytes([2, 3, 0, rid & 255, 0, 8, 0, 0]) + b"\x00" * 8)


def http_junk(c):
    data = b""
    while b"\r\n\r\n" not in data:
        b = c.recv(4096)
        if not b:
            return
        data += b
    c.sendall(b"SSH-2.0-not-http\r\n")
    while c.recv(4096):
        pass


def main():
    mode, portfile = sys.argv[1], sys.argv[2]
    handler = {"mysql-cut": mysql_cut, "mysql-junk": mysql_junk, "mysql-extra": mysql_extra,
               "fcgi-cut": fcgi_cut, "fcgi-v2": fcgi_v2, "http-junk": http_junk}[mode]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    with open(portfile, "w") as f:
        f.write(str(s.getsockname()[1]))

    def serve(c):
        try:
            handler(c)
        except OSError:
            pass
        finally:
            c.close()

    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
