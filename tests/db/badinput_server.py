#!/usr/bin/env python3
"""badinput_server.py PORTFILE - a fake Redis for db_badinput.sh: per connection, reads one
command and answers by its key: "cut" half a bulk reply then closes; "garbage" bytes that are
not RESP; "ok" +OK. Prints nothing; writes its port to PORTFILE."""
import socket
import sys
import threading

srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])


def serve(c):
    data = b""
    while data.count(b"\r\n") < 5:
        d = c.recv(4096)
        if not d:
            return
        data += d
    if b"cut" in data:
        c.sendall(b"$10\r\nabc")
    elif b"garbage" in data:
        c.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    else:
        c.sendall(b"+OK\r\n")
    c.close()


while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
