#!/usr/bin/env python3
"""sw8_cases.py PORT BODY_FILE: sends one request per malformed sw8 kind (one connection each,
Connection: close) to 127.0.0.1:PORT, path /hello.txt?case=NAME, and checks that each is
answered normally: status 200 and exactly the body of BODY_FILE. Prints the case names, one a
line; exits 1 on the first bad answer. The last case, `valid`, carries a well-formed sw8 (the
control that shows the test can tell a joined request from a new trace)."""
import base64
import random
import socket
import sys


def b64(s):
    return base64.b64encode(s.encode()).decode()


port = int(sys.argv[1])
with open(sys.argv[2], "rb") as f:
    want = f.read()

good = ["1", b64("e2e-trace-1"), b64("e2e-seg-1"), "3", b64("e2e-parent"),
        b64("e2e-parent-inst"), b64("GET:/parent"), b64("127.0.0.1:%d" % port)]
rnd = random.Random(7)
garbage = "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_")
                  for _ in range(4096))
# obs-text (0x80-0xff) is allowed in a field value by RFC 9110; tab too.
binary_high = bytes(range(0x80, 0x100)) + b"\t" + bytes(range(0x80, 0x100))
# Other control bytes are not (RFC 9110 5.5); the request must still be answered normally.
binary_ctl = bytes(b for b in range(1, 0x20) if b not in (9, 10, 13)) + b"\x7f"

def join(fields):
    return "-".join(fields).encode()

cases = [
    ("empty", b""),
    ("seven_fields", join(good[:7])),
    ("nine_fields", join(good + ["x"])),
    ("bad_base64", join(good[:1] + ["!!!not*base64!!!"] + good[2:])),
    # "???" is Pz8/ in standard base64 and Pz8_ in base64url.
    ("base64url", join(good[:1] + ["Pz8_"] + good[2:])),
    ("unpadded", join(good[:1] + [b64("e2e-trace-1").rstrip("=")] + good[2:])),
    ("negative_span", join(good[:3] + ["-1"] + good[4:])),
    ("span_not_number", join(good[:3] + ["x1"] + good[4:])),
    ("empty_fields", join(["1", "", "", "0", "", "", "", ""])),
    ("garbage_4k", garbage.encode()),
    ("binary_high", binary_high),
    ("binary_ctl", binary_ctl),
    ("only_dashes", b"-------"),
    ("valid", join(good)),
]

for name, value in cases:
    req = (b"GET /hello.txt?case=" + name.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port
           + b"sw8: " + value + b"\r\nConnection: close\r\n\r\n")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(req)
    resp = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        resp += chunk
    s.close()
    head, _, body = resp.partition(b"\r\n\r\n")
    status = head.split(b"\r\n")[0]
    if not status.startswith(b"HTTP/1.0 200") and not status.startswith(b"HTTP/1.1 200"):
        print("case %s: status line %r" % (name, status), file=sys.stderr)
        sys.exit(1)
    if body != want:
        print("case %s: body differs (%d bytes)" % (name, len(body)), file=sys.stderr)
        sys.exit(1)
    print(name)
