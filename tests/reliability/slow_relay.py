#!/usr/bin/env python3
"""slow_relay.py - a TCP relay on loopback that delays every chunk, in both directions, by a
fixed time: a long-distance link (latency, not bandwidth) between the reporter and
collector-stub.

    slow_relay.py --target PORT --port-file FILE [--delay-ms MS] [--max-seconds S]

Listens on 127.0.0.1 (an ephemeral port, written to FILE once listening) and connects each
accepted connection to 127.0.0.1:PORT. Every chunk read on one side is written to the other
MS milliseconds after it was read (order kept, chunks pipelined), so a round trip takes
2 * MS. A half-close is passed on after the same delay. Exits by itself after S seconds.
Prints one line per connection to stderr.
"""
import argparse
import asyncio
import os
import sys


async def pump(reader, writer, delay):
    """Copies reader to writer, each chunk `delay` seconds after it was read."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def read_side():
        try:
            while True:
                data = await reader.read(65536)
                await queue.put((loop.time() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((loop.time() + delay, b""))

    async def write_side():
        try:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
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
    ap.add_argument("--delay-ms", type=int, default=200)
    ap.add_argument("--max-seconds", type=float, default=110)
    args = ap.parse_args()
    delay = args.delay_ms / 1000.0
    count = 0

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
        print(f"slow_relay: connection {n} (delay {args.delay_ms} ms each way)",
              file=sys.stderr, flush=True)
        await asyncio.gather(pump(c_reader, s_writer, delay), pump(s_reader, c_writer, delay))
        c_writer.close()
        s_writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
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
