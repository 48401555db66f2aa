#!/usr/bin/python3
"""greeter.py - a gRPC greeter with Debian's python3-grpcio (grpc core, system libssl3), for
the HTTP/2 tests. No protoc: generic handlers with bytes (de)serializers; the messages are raw
bytes, which gRPC does not look at.

  greeter.py serve [--tls CERT KEY] [--relay TARGET [--relay-ca CA]]
      serves helloworld.Greeter on 127.0.0.1:<kernel-chosen port>, prints "PORT n":
        SayHello       unary: b"hello " + request
        SayHelloStream server-streaming: 3 replies b"hello i " + request
        Fail           unary: aborts with NOT_FOUND "no such greeting"
        Relay          unary: calls TARGET's SayHello (over TLS with --relay-ca) while serving,
                       answers b"relayed " + its reply
  greeter.py call TARGET METHOD [--tls CA] [--n N] [--authority NAME]
      N calls (default 1) of METHOD on one channel; prints each reply (or "status CODE") per line.
TLS targets are 127.0.0.1:PORT (the test certificate's IP name); the servers listen there.
"""
import sys
import threading
from concurrent import futures

import grpc

SVC = "helloworld.Greeter"
ident = lambda b: b  # noqa: E731


def opt(args, name, n=1):
    if name not in args:
        return None
    i = args.index(name)
    v = args[i + 1:i + 1 + n]
    del args[i:i + 1 + n]
    return v if n > 1 else v[0]


def channel(target, ca, authority=None):
    opts = [("grpc.ssl_target_name_override", authority)] if authority else []
    if ca:
        with open(ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        return grpc.secure_channel(target, creds, options=opts)
    return grpc.insecure_channel(target, options=opts)


def serve(args):
    tls = opt(args, "--tls", 2)
    relay = opt(args, "--relay")
    relay_ca = opt(args, "--relay-ca")
    relay_ch = [None]
    lock = threading.Lock()

    def say_hello(req, ctx):
        return b"hello " + req

    def say_hello_stream(req, ctx):
        for i in range(3):
            yield b"hello %d " % i + req

    def fail(req, ctx):
        ctx.abort(grpc.StatusCode.NOT_FOUND, "no such greeting")

    def do_relay(req, ctx):
        with lock:
            if relay_ch[0] is None:
                relay_ch[0] = channel(relay, relay_ca)
        call = relay_ch[0].unary_unary("/%s/SayHello" % SVC, request_serializer=ident,
                                       response_deserializer=ident)
        return b"relayed " + call(req, timeout=10)

    handlers = {
        "SayHello": grpc.unary_unary_rpc_method_handler(say_hello, ident, ident),
        "SayHelloStream": grpc.unary_stream_rpc_method_handler(say_hello_stream, ident, ident),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, ident, ident),
        "Relay": grpc.unary_unary_rpc_method_handler(do_relay, ident, ident),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SVC, handlers),))
    if tls:
        with open(tls[0], "rb") as f:
            cert = f.read()
        with open(tls[1], "rb") as f:
            key = f.read()
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("PORT %d" % port, flush=True)
    server.wait_for_termination()


def call(args):
    ca = opt(args, "--tls")
    n = int(opt(args, "--n") or 1)
    authority = opt(args, "--authority")
    target, method = args[0], args[1]
    ch = channel(target, ca, authority)
    path = "/%s/%s" % (SVC, method)
    rc = 0
    for i in range(n):
        req = b"world %d" % i
        try:
            if method == "SayHelloStream":
                fn = ch.unary_stream(path, request_serializer=ident, response_deserializer=ident)
                for r in fn(req, timeout=10):
                    print(r.decode())
            else:
                fn = ch.unary_unary(path, request_serializer=ident, response_deserializer=ident)
                print(fn(req, timeout=10).decode())
        except grpc.RpcError as e:
            print("status %s" % e.code().name)
            if e.code() == grpc.StatusCode.UNAVAILABLE or e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                rc = 1
    ch.close()
    return rc


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "serve":
        serve(a[1:])
    elif a and a[0] == "call":
        sys.exit(call(a[1:]))
    else:
        sys.exit(__doc__)
