#!/usr/bin/python3
"""raw_h2.py - hand-made HTTP/2 bytes on plain sockets, good and bad, for tests/h2/bad.sh.

  raw_h2.py serve victim   prints "PORT n"; per connection: reads until nothing came for
                           0.5 s (or EOF; 5 s at most), prints "got <sha256> <len>" of the
                           bytes read, answers SETTINGS + HEADERS(stream 1, :status 200,
                           END_STREAM), closes.
  raw_h2.py serve bad      prints "PORT n"; per connection: reads until a case name
                           (/s_<case>) is in the bytes, answers that case's bytes, closes.
  raw_h2.py client PORT CASE
                           c_<case>: sends the case's bytes;
                           s_<case>: sends a good request for /s_<case> and keeps writing
                           nothing more; then reads until EOF and prints
                           "got <sha256> <len>" of the bytes read.
Cases: c_good c_preface c_hpack c_flood c_big c_unknown (the client's bytes are bad);
       s_good s_hpack s_flood s_unknown (the server's are).
"""
import hashlib
import socket
import sys
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(ftype, flags, sid, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload


def lit(name, value):
    """A literal field without indexing, new name, raw strings (lengths < 127 or 7-bit+)."""
    def s(b):
        n = len(b)
        if n < 127:
            return bytes([n]) + b
        out, n = bytearray([127]), n - 127
        while n >= 128:
            out.append((n & 0x7f) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out) + b
    return b"\x00" + s(name) + s(value)


def get(path):
    # :method GET (2), :scheme http (6), :path literal with indexed name 4, :authority (1)
    p = path.encode()
    return b"\x82\x86\x04" + bytes([len(p)]) + p + b"\x01\x09127.0.0.1"


SETTINGS = frame(4, 0, 0)
OK200 = frame(1, END_HEADERS | END_STREAM, 1, b"\x88")
FLOOD = 20000


def flood(first_payload, first_flags):
    out = [frame(1, first_flags, 1, first_payload)]
    for i in range(FLOOD):
        out.append(frame(9, END_HEADERS if i == FLOOD - 1 else 0, 1, lit(b"a", b"b")))
    return b"".join(out)


def big():
    out = [frame(1, END_STREAM, 1, get("/c_big"))]
    chunk = lit(b"big", b"x" * 16000)
    n = 64  # about 1 MB of header list
    for i in range(n):
        out.append(frame(9, END_HEADERS if i == n - 1 else 0, 1, chunk))
    return b"".join(out)


CLIENT = {
    "c_good": lambda: PREFACE + SETTINGS + frame(1, END_HEADERS | END_STREAM, 1, get("/c_good")),
    "c_preface": lambda: b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + SETTINGS
    + frame(1, END_HEADERS | END_STREAM, 1, get("/c_preface")),
    # an indexed field far past the static and the (empty) dynamic table
    "c_hpack": lambda: PREFACE + SETTINGS
    + frame(1, END_HEADERS | END_STREAM, 1, b"\x82\x86\xff\xff\xff\xff\x0f")
    + frame(1, END_HEADERS | END_STREAM, 3, get("/c_hpack_after")),
    "c_flood": lambda: PREFACE + SETTINGS + flood(get("/c_flood"), END_STREAM),
    "c_big": lambda: PREFACE + SETTINGS + big(),
    "c_unknown": lambda: PREFACE + SETTINGS + frame(0x42, 0, 0, b"junk")
    + frame(0xfa, 0xff, 1, b"x" * 100) + frame(1, END_HEADERS | END_STREAM, 1, get("/c_unknown"))
    + frame(0x20, 0, 3),
}
SERVER = {
    "s_good": lambda: SETTINGS + OK200,
    "s_hpack": lambda: SETTINGS + frame(1, END_HEADERS | END_STREAM, 1, b"\xff\xff\xff\xff\x0f"),
    "s_flood": lambda: SETTINGS + flood(b"\x88", END_STREAM),
    "s_unknown": lambda: SETTINGS + frame(0x42, 0, 0, b"junk") + frame(0xfa, 0xff, 1, b"x" * 100)
    + OK200 + frame(0x20, 0, 1),
}


def read_until(sock, done, limit=5.0, idle=None):
    """Reads until done(data), EOF, `limit` seconds, or (idle) nothing for `idle` seconds."""
    data = bytearray()
    sock.settimeout(0.1)
    now = time.monotonic()
    end, last = now + limit, now
    while time.monotonic() < end and not done(data):
        try:
            b = sock.recv(65536)
        except socket.timeout:
            if idle and data and time.monotonic() - last >= idle:
                break
            continue
        last = time.monotonic()
        if not b:
            break
        data += b
    return bytes(data)


def digest(data):
    return "got %s %d" % (hashlib.sha256(data).hexdigest(), len(data))


def serve(mode):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    print("PORT %d" % ls.getsockname()[1], flush=True)
    lock = threading.Lock()

    def one(s):
        try:
            if mode == "victim":
                data = read_until(s, lambda d: False, idle=0.5)
                with lock:
                    print(digest(data), flush=True)
                s.sendall(SETTINGS + OK200)
            else:
                data = read_until(s, lambda d: any(("/" + k).encode() in d for k in SERVER))
                case = [k for k in SERVER if ("/" + k).encode() in data]
                if case:
                    s.sendall(SERVER[case[0]]())
        finally:
            s.close()

    while True:
        s, _ = ls.accept()
        threading.Thread(target=one, args=(s,), daemon=True).start()


def client(port, case):
    s = socket.create_connection(("127.0.0.1", port))
    if case.startswith("c_"):
        s.sendall(CLIENT[case]())
    else:
        s.sendall(PREFACE + SETTINGS + frame(1, END_HEADERS | END_STREAM, 1, get("/" + case)))
    print(digest(read_until(s, lambda d: False, 10.0)), flush=True)
    s.close()


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "serve":
        serve(a[1])
    elif len(a) == 3 and a[0] == "client":
        client(int(a[1]), a[2])
    else:
        sys.exit(__doc__)
