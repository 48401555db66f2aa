"""tls_bad_client.py CASE PORT - bad input for an HTTPS server; prints what came back.

CASE: garbage (random bytes instead of a ClientHello), plain (a plaintext HTTP request to the
TLS port), midrecord (a handshake, a partial request head, then a record header with a
truncated payload, and the connection closed), half (a handshake, a partial head, then the
connection closed), reset (a whole request, then a reset before the answer); rst-server (port 0,
CERT KEY: a TLS server that resets after one request head). Prints the bytes the server sent back (Date lines removed, TLS records by
type and length only), so runs against a traced and an untraced server can be compared.
"""
import random
import re
import socket
import ssl
import struct
import sys
import time

case, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=5) if port else socket.socket()


def drain(sock):
    data = b""
    try:
        while True:
            b = socket.socket.recv(sock, 65536)
            if not b:
                break
            data += b
    except socket.timeout as e:
        data += b"<%s>" % type(e).__name__.encode()
    except OSError:
        pass  # a reset after the server's last bytes: timing (see send_all)
    return data


def show(data):
    if data[:1] in (b"\x15", b"\x16", b"\x17"):
        out, i = [], 0
        while i + 5 <= len(data):
            n = int.from_bytes(data[i + 3:i + 5], "big")
            out.append("record type %d len %d" % (data[i], n))
            i += 5 + n
        return "\n".join(out)
    return re.sub(rb"(?m)^Date: .*\r\n", b"", data).decode("latin-1")


def send_all(sock, data):
    # The server may close (and reset) as soon as it sees bad bytes: when that happens before
    # our last byte or our shutdown is timing, not behaviour, so it is not part of the output.
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


if case == "garbage":
    rnd = random.Random(35)
    send_all(s, bytes(rnd.randrange(256) for _ in range(700)))
    print(show(drain(s)))
elif case == "plain":
    s.sendall(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    print(show(drain(s)))
elif case in ("midrecord", "half"):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s)
    t.write(b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
    if case == "midrecord":
        socket.socket.send(t, b"\x17\x03\x03\x01\x00" + b"\x42" * 40)
    socket.socket.shutdown(t, socket.SHUT_WR)
    print(show(drain(t)))
elif case == "reset":
    # A whole request, then the connection reset (SO_LINGER 0) before the answer comes.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s)
    t.write(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    # The server reads the request at once, then answers after a second: reset in between
    # (a reset that came first would drop the unread request: no request, nothing recorded).
    time.sleep(0.4)
    socket.socket.setsockopt(t, socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    socket.socket.close(t)
    print("reset")
elif case == "rst-server":
    # Not a client: a TLS server that reads one request head and resets the connection
    # (port 0: prints "PORT n"; one connection).
    s.close()
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    print("PORT %d" % ls.getsockname()[1], flush=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    c, _ = ls.accept()
    t = ctx.wrap_socket(c, server_side=True)
    data = b""
    while b"\r\n\r\n" not in data:
        data += t.recv(4096)
    socket.socket.setsockopt(t, socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    socket.socket.close(t)
else:
    sys.exit("unknown case " + case)
