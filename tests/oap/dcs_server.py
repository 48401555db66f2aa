#!/usr/bin/python3
"""dcs_server.py - a dynamic configuration server for the OAP (its `grpc` configuration
centre), for oap_cds: SkyWalking's published ConfigurationService (configuration-service.proto
of the OAP's grpc-configuration-sync module: `call` and `callGroup`), served on a free loopback
port with Debian's python3-grpcio. It is the OAP's configuration source, not a stand-in for the
OAP: the OAP polls it every SW_DCS_PERIOD seconds and serves what it holds to the agents
through its own ConfigurationDiscoveryService.

    dcs_server.py TABLE_FILE

TABLE_FILE holds the configuration table as JSON, {"<module>.<provider>.<item>": "value", ...},
read again at each call (a key left out is a key removed). Prints "PORT <n>" once listening,
then one line per call: "call <n> uuid=<uuid of the table sent> keys=<names>".
The messages are encoded by hand (a few string fields), so no generated code is needed.
"""
import hashlib
import json
import sys
from concurrent import futures

import grpc


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, data):
    """A length-delimited field (string or embedded message)."""
    if isinstance(data, str):
        data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data


def decode(buf):
    """The length-delimited fields of a message, {number: [bytes, ...]}; other wire types are
    skipped."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 2:
            n, i = read_varint(buf, i)
            out.setdefault(num, []).append(buf[i:i + n])
            i += n
        elif wt == 0:
            _, i = read_varint(buf, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
    return out


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


class Server:
    def __init__(self, path):
        self.path = path
        self.calls = 0

    def table(self):
        with open(self.path) as f:
            t = json.load(f)
        uuid = hashlib.sha256(json.dumps(t, sort_keys=True).encode()).hexdigest()
        return t, uuid

    def call(self, req, ctx):
        fields = decode(req)
        asked = fields.get(2, [b""])[0].decode()
        t, uuid = self.table()
        self.calls += 1
        print("call %d uuid=%s keys=%s" % (self.calls, uuid[:12], ",".join(sorted(t))), flush=True)
        # ConfigurationResponse {repeated Config configTable = 1; string uuid = 2}: the table
        # only when the caller's copy differs (configuration-service.proto).
        out = field(2, uuid)
        if asked != uuid:
            for name in sorted(t):
                out = field(1, field(1, name) + field(2, str(t[name]))) + out
        return out

    def call_group(self, req, ctx):
        # GroupConfigurationResponse: no group configuration (uuid only).
        return field(2, "no-groups")


def main():
    srv = Server(sys.argv[1])
    ident = lambda b: b  # noqa: E731 (the messages are bytes, encoded above)
    handler = grpc.method_handlers_generic_handler("ConfigurationService", {
        "call": grpc.unary_unary_rpc_method_handler(srv.call, ident, ident),
        "callGroup": grpc.unary_unary_rpc_method_handler(srv.call_group, ident, ident),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("PORT %d" % port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
