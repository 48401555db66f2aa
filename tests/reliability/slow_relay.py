#!/usr/bin/env python3
"""slow_relay.py - a TCP relay on loopback that delays every chunk, in both directions, by a
fixed time, and can limit each direction's bandwidth: a long-distance or narrow link between
the reporter and collector-stub.

    slow_relay.py --target PORT --port-file FILE [--port P] [--delay-ms MS] [--rate BYTES_PER_S]
                  [--max-seconds S]

Listens on 127.0.0.1 (port P, default an ephemeral port, written to FILE once listening) and
connects each accepted connection to 127.0.0.1:PORT. Every chunk read on one side is written
to the other MS milliseconds after it was read (order kept, chunks pipelined), so a round trip
takes 2 * MS. With --rate, each direction is a link of BYTES_PER_S: a chunk is written MS after
the link has carried its last byte (the link carries one chunk at a time, in order), and the
relay reads a direction only while it holds at most a few chunks of it (the rest waits in the
sockets' buffers and the sender's flow-control windows). A half-close is passed on after the
same delay. Exits by itself after S seconds.
Prints one line per connection to stderr.
"""
import argparse
import asyncio
import os
import sys

QUEUED_CHUNKS = 4  # chunks held per direction while --rate limits it


async def pump(reader, writer, delay, rate):
    """Copies reader to writer, each chunk `delay` seconds after it was read, or, with `rate`
    (bytes per second), `delay` seconds after the link finished carrying it."""
    loop = asyncio.get_running_loop()
    # Chunks of about 1/20 s of the link: its pace stays even, and the relay holds little.
    chunk = min(65536, max(1024, rate // 20)) if rate else 65536
    queue = asyncio.Queue(QUEUED_CHUNKS if rate else 0)

    async def read_side():
        try:
            while True:
                data = await reader.read(chunk)
                await queue.put((loop.time(), data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((loop.time(), b""))

    async def write_side():
        link_free = 0.0  # when the link has carried the previous chunk
        try:
            while True:
                t_read, data = await queue.get()
                due = t_read
                if rate and data:
                    link_free = max(t_read, link_free) + len(data) / rate
                    due = link_free
                wait = due + delay - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return

    await asyncio.gather(read_side(), write_side())


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=int, required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay-ms", type=int, default=200)
    ap.add_argument("--rate", type=int, default=0, help="bytes per second each way (0: no limit)")
    ap.add_argument("--max-seconds", type=float, default=110)
    args = ap.parse_args()
    delay = args.delay_ms / 1000.0
    count = 0
    link = f"delay {args.delay_ms} ms each way" + (f", {args.rate} bytes/s" if args.rate else "")

    async def handle(c_reader, c_writer):
        nonlocal count
        count += 1
        n = count
        try:
            s_reader, s_writer = await asyncio.open_connection("127.0.0.1", args.target)
        except OSError as e:
            print(f"slow_relay: connection {n}: upstream: {e}", file=sys.stderr, flush=True)
            c_writer.close()
            return
        print(f"slow_relay: connection {n} ({link})", file=sys.stderr, flush=True)
        await asyncio.gather(pump(c_reader, s_writer, delay, args.rate),
                             pump(s_reader, c_writer, delay, args.rate))
        c_writer.close()
        s_writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", args.port)
    port = server.sockets[0].getsockname()[1]
    with open(args.port_file + ".tmp", "w") as f:
        f.write(f"{port}\n")
    os.rename(args.port_file + ".tmp", args.port_file)
    await asyncio.sleep(args.max_seconds)
    server.close()  # open connections go with the loop (asyncio.run cancels their tasks)
    print("slow_relay: time is up", file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
