"""tls_slow_server.py CERT KEY DIR - a slow HTTPS reader that keeps exactly what it received.

Not traced. Listens on a kernel-chosen loopback port with a small receive buffer (4096) and
prints "PORT n". For each connection: completes the handshake, sleeps 0.4 s (the client's
writes fill the buffers and hit WANT_WRITE), then reads the request (head, then
Content-Length bytes of body) in 1 KiB pieces, writes the plaintext exactly as received to
DIR/conn-N.bin and answers 200 with the number of body bytes received.
"""
import os
import socket
import ssl
import sys
import time

cert, key, out = sys.argv[1:4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
ls.bind(("127.0.0.1", 0))
ls.listen(8)
print("PORT %d" % ls.getsockname()[1], flush=True)
n = 0
while True:
    c, _ = ls.accept()
    n += 1
    try:
        s = ctx.wrap_socket(c, server_side=True)
        time.sleep(0.4)
        data = b""
        while b"\r\n\r\n" not in data:
            b = s.recv(1024)
            if not b:
                break
            data += b
        head, _, rest = data.partition(b"\r\n\r\n")
        cl = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                cl = int(v)
        while len(rest) < cl:
            b = s.recv(1024)
            if not b:
                break
            rest += b
            data += b
        with open(os.path.join(out, "conn-%d.bin" % n), "wb") as f:
            f.write(data)
        body = b"%d\n" % len(rest)
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.close()
    except (ssl.SSLError, OSError) as e:
        print("conn %d: %s" % (n, e), file=sys.stderr, flush=True)
        c.close()
