#!/usr/bin/env python3
"""badinput_client.py PORT KEY - sends GET KEY as RESP, prints every byte received (repr)
until the server closes."""
import socket
import sys

s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
k = sys.argv[2].encode()
s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k))
out = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    out += d
print(repr(out))
