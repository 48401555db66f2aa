#!/usr/bin/python3
"""HTTP/2 byte streams for test_h2 (agent/proto_h2.c), made with Debian's python3-h2 family
(hpack for header blocks, hyperframe for frames), and the check of what test_h2 put on the wire.

  h2_vectors.py gen DIR     writes DIR/client.bin (what a client writes: preface, SETTINGS,
                            requests on streams 1..13 with every framing feature), DIR/server.bin
                            (what the server writes back), DIR/expect.txt (facts test_h2 checks)
  h2_vectors.py check DIR   decodes DIR/wire.bin (client.bin as test_h2's client sent it, sw8
                            inserted) with hpack's own decoder: every request's fields as the
                            application wrote them, plus sw8 where expected, the peer's table in
                            step (later indexed fields still decode right); exit 1 otherwise.
"""
import sys

from hpack import Decoder, Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame,
                              PingFrame, RstStreamFrame, SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
INJ_SW8 = "1-VEVTVA==-U0VH-1-c3Zj-aW5zdA==-L3Rlc3Q=-aG9zdDo4MA=="  # tests/unit/fake_trace.h


def requests():
    big = "v" * 3000
    return [
        # (stream, headers, framing, body, app_sw8)
        (1, [(":method", "GET"), (":scheme", "http"), (":path", "/a/b?q=1"),
             (":authority", "example.com:8080"), ("user-agent", "test/1.0"),
             ("accept", "*/*")], "plain", None),
        (3, [(":method", "POST"), (":scheme", "http"), (":path", "/helloworld.Greeter/SayHello"),
             (":authority", "grpc.local"), ("content-type", "application/grpc"),
             ("te", "trailers"), ("grpc-timeout", "1S"), ("x-long", "w" * 200)],
         "cont_pad_prio", b"\x00\x00\x00\x00\x05hello"),
        (5, [(":method", "GET"), (":scheme", "http"), (":path", "/a/b?q=1"),
             (":authority", "example.com:8080"), ("user-agent", "test/1.0"),
             ("accept", "*/*")], "plain", None),
        (7, [(":method", "GET"), (":scheme", "http"), (":path", "/fwd"),
             (":authority", "example.com:8080"), ("sw8", "1-Zm9yd2FyZGVk-eA==-0-eA==-eA==-eA==-eA==")],
         "plain", None),
        (9, [(":method", "PUT"), (":scheme", "http"), (":path", "/big"),
             (":authority", "example.com:8080"), ("x-big", big)], "cont", b"body"),
        (11, [(":method", "GET"), (":scheme", "http"), (":path", "/a/b?q=1"),
              (":authority", "example.com:8080"), ("user-agent", "test/1.0")], "padded", None),
        (13, [(":method", "POST"), (":scheme", "http"), (":path", "/pkg.Svc/Fail"),
              (":authority", "grpc.local"), ("content-type", "application/grpc+proto")],
         "plain", b"\x00\x00\x00\x00\x00"),
    ]


def header_frames(enc, sid, hdrs, framing, end_stream):
    block = enc.encode(hdrs)
    frames = []
    if framing.startswith("cont"):
        cut = [len(block) // 3, 2 * len(block) // 3]
        parts = [block[:cut[0]], block[cut[0]:cut[1]], block[cut[1]:]]
        f = HeadersFrame(sid, parts[0])
        if framing == "cont_pad_prio":
            f.flags.add("PADDED")
            f.pad_length = 7
            f.flags.add("PRIORITY")
            f.depends_on, f.stream_weight, f.exclusive = 0, 15, False
        if end_stream:
            f.flags.add("END_STREAM")
        frames.append(f)
        c1 = ContinuationFrame(sid, parts[1])
        c2 = ContinuationFrame(sid, parts[2])
        c2.flags.add("END_HEADERS")
        frames += [c1, c2]
    else:
        f = HeadersFrame(sid, block)
        f.flags.add("END_HEADERS")
        if framing == "padded":
            f.flags.add("PADDED")
            f.pad_length = 5
        if end_stream:
            f.flags.add("END_STREAM")
        frames.append(f)
    return frames


def unknown_frame(sid, payload):
    # type 0x42, flags 0: ignored by every HTTP/2 implementation (RFC 9113 4.1)
    n = len(payload)
    return bytes([n >> 16, (n >> 8) & 255, n & 255, 0x42, 0]) + sid.to_bytes(4, "big") + payload


def gen(outdir):
    cenc, senc = Encoder(), Encoder()
    client = bytearray(PREFACE)
    s = SettingsFrame(0)
    s.settings = {SettingsFrame.HEADER_TABLE_SIZE: 4096, SettingsFrame.ENABLE_PUSH: 0}
    client += s.serialize()
    client += WindowUpdateFrame(0, window_increment=65535).serialize()
    server = bytearray()
    s = SettingsFrame(0)
    s.settings = {SettingsFrame.MAX_CONCURRENT_STREAMS: 100, SettingsFrame.MAX_FRAME_SIZE: 16384}
    server += s.serialize()
    expect = []
    for sid, hdrs, framing, body in requests():
        for f in header_frames(cenc, sid, hdrs, framing, body is None):
            client += f.serialize()
        if body is not None:
            d = DataFrame(sid, body)
            d.flags.add("END_STREAM")
            if sid == 9:
                d.flags.add("PADDED")
                d.pad_length = 3
            client += d.serialize()
        if sid == 7:
            expect.append("sw8at %d %s" % (len(client), dict(hdrs)["sw8"]))
        if sid == 5:
            client += unknown_frame(0, b"ignored")
            client += PingFrame(0, b"12345678").serialize()
        d = dict(hdrs)
        expect.append("request %d %s %s %s" % (sid, d[":method"], d[":path"], d[":authority"]))
    ack = SettingsFrame(0)
    ack.flags.add("ACK")
    server += ack.serialize()
    # responses
    def resp(sid, hdrs, end):
        f = HeadersFrame(sid, senc.encode(hdrs))
        f.flags.add("END_HEADERS")
        if end:
            f.flags.add("END_STREAM")
        return f.serialize()
    server += resp(1, [(":status", "200"), ("content-type", "text/plain")], False)
    dd = DataFrame(1, b"hello")
    dd.flags.add("END_STREAM")
    server += dd.serialize()
    server += resp(3, [(":status", "200"), ("content-type", "application/grpc")], False)
    server += DataFrame(3, b"\x00\x00\x00\x00\x02hi").serialize()
    server += resp(3, [("grpc-status", "0")], True)
    server += resp(5, [(":status", "404")], True)
    server += RstStreamFrame(7, error_code=8).serialize()
    server += resp(9, [(":status", "201")], True)
    server += resp(11, [(":status", "200"), ("content-type", "text/plain")], True)
    # Trailers-Only: one HEADERS with the status and the gRPC status
    server += resp(13, [(":status", "200"), ("content-type", "application/grpc"),
                        ("grpc-status", "5"), ("grpc-message", "not found")], True)
    g = GoAwayFrame(0, last_stream_id=13, error_code=0)
    server += g.serialize()
    open(outdir + "/client.bin", "wb").write(bytes(client))
    open(outdir + "/server.bin", "wb").write(bytes(server))
    open(outdir + "/expect.txt", "w").write("\n".join(expect) + "\n")


def frames(buf):
    i = 0
    while i < len(buf):
        f, n = Frame.parse_frame_header(memoryview(buf[i:i + 9]))
        f.parse_body(memoryview(buf[i + 9:i + 9 + n]))
        yield f
        i += 9 + n


def inserted(value):
    """Our field as proto_h2.c writes it: never indexed, new name, raw strings."""
    out = bytes([0x10, 3]) + b"sw8"
    n = len(value)
    if n < 127:
        out += bytes([n])
    else:
        out += bytes([127])
        n -= 127
        while n >= 128:
            out += bytes([0x80 | (n & 127)])
            n >>= 7
        out += bytes([n])
    return out + value.encode()


def end_frames(client):
    """Per request stream: (offset of its END_HEADERS frame, offset where sw8 goes)."""
    res, i = {}, len(PREFACE)
    while i < len(client):
        f, n = Frame.parse_frame_header(memoryview(client[i:i + 9]))
        f.parse_body(memoryview(client[i + 9:i + 9 + n]))
        if isinstance(f, (HeadersFrame, ContinuationFrame)) and "END_HEADERS" in f.flags:
            pad = getattr(f, "pad_length", 0) if "PADDED" in f.flags else 0
            res[f.stream_id] = (i, i + 9 + n - pad)
        i += 9 + n
    return res


def check_wire(wire, k, client, ends):
    """Decodes one wire; returns the list of problems."""
    bad = []
    if not wire.startswith(PREFACE):
        return ["preface"]
    dec = Decoder()
    got, block, sid = {}, b"", None
    for f in frames(wire[len(PREFACE):]):
        if isinstance(f, HeadersFrame):
            block, sid = f.data, f.stream_id
        elif isinstance(f, ContinuationFrame):
            if f.stream_id != sid:
                bad.append("CONTINUATION of another stream")
            block += f.data
        else:
            continue
        if "END_HEADERS" in f.flags:
            got[sid] = dec.decode(block)
    restored = bytearray(wire)
    # undo our edits from the end: drop the inserted field, restore the frame length
    for sid, hdrs, framing, body in reversed(requests()):
        h = got.get(sid)
        if h is None:
            bad.append("stream %d: no header block" % sid)
            continue
        fa, ins = ends[sid]
        skipped = k and fa < k < ins  # the frame header went out before the block's end
        want = list(hdrs)
        if not skipped:  # stream 7 (the application's own sw8): ours after it
            want.append(("sw8", INJ_SW8))
        if h != want:
            bad.append("stream %d: decoded %r expected %r" % (sid, h, want))
            continue
        if not skipped:
            # where our bytes are in the wire: find this frame by its offset shift
            shift = sum(len(inserted(INJ_SW8)) for s2, _, _, _ in requests()
                        if s2 < sid and not (k and ends[s2][0] < k < ends[s2][1]))
            at = ins + shift
            ib = inserted(INJ_SW8)
            if bytes(restored[at:at + len(ib)]) != ib:
                bad.append("stream %d: inserted bytes not where expected" % sid)
                continue
            del restored[at:at + len(ib)]
            fo = fa + shift
            ln = int.from_bytes(restored[fo:fo + 3], "big") - len(ib)
            restored[fo:fo + 3] = ln.to_bytes(3, "big")
    if not bad and bytes(restored) != client:
        bad.append("wire minus our edits differs from the application's bytes")
    return bad


def check(outdir):
    client = open(outdir + "/client.bin", "rb").read()
    ends = end_frames(client)
    data = open(outdir + "/wires.bin", "rb").read()
    i, n, failed, skipped_runs = 0, 0, 0, 0
    while i < len(data):
        k = int.from_bytes(data[i:i + 4], "little")
        ln = int.from_bytes(data[i + 4:i + 8], "little")
        wire = data[i + 8:i + 8 + ln]
        i += 8 + ln
        n += 1
        problems = check_wire(wire, k, client, ends)
        if problems:
            failed += 1
            if failed <= 5:
                print("split %d: %s" % (k, "; ".join(problems)))
    print("wires checked: %d, failed: %d" % (n, failed))
    sys.exit(0 if n > 0 and failed == 0 else 1)


if __name__ == "__main__":
    {"gen": gen, "check": check}[sys.argv[1]](sys.argv[2])
