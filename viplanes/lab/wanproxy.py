"""The lab's WAN model: a pacing TCP proxy on the cloud host, one token bucket per connection.

A real WAN caps each TCP connection: its window over a long round trip, and cloud endpoints that
throttle each connection. This kernel has no netem (no delay) and no fq, and tc police does not
load, so the cap is made in userspace instead: the cloud's services listen on the cloud host's
loopback, and this proxy listens on its public address in front of them. Every accepted
connection is forwarded in both directions, each direction through its own token bucket at
``--mbps``. Reading stops while a bucket is empty, so TCP's own flow control pushes back on the
sender: a client sees a slow connection, never an error.

    python -m viplanes.lab.wanproxy --mbps 10 --forward 203.0.113.10:9000=127.0.0.1:9000

`TokenBucket` is pure (the clock is passed in); the asyncio glue only reads, waits and writes.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from dataclasses import dataclass

READ_BYTES = 32 * 1024  # one read, at most (less with a smaller burst)


@dataclass
class TokenBucket:
    """Bytes may leave at ``rate_bps`` on average, at most ``burst_bytes`` ahead of that rate.

    `take` charges a read before it is sent and says how long to wait; going into debt (rather
    than refusing) keeps the long-run rate exact whatever the read sizes are.
    """

    rate_bps: float  # bits per second
    burst_bytes: float
    tokens: float = 0.0
    last: float | None = None

    def take(self, nbytes: int, now: float) -> float:
        """Charge ``nbytes`` at time ``now``; the seconds to wait before sending them."""
        if self.last is None:
            self.tokens, self.last = self.burst_bytes, now
        rate = self.rate_bps / 8
        self.tokens = min(self.burst_bytes, self.tokens + (now - self.last) * rate)
        self.last = now
        self.tokens -= nbytes
        return -self.tokens / rate if self.tokens < 0 else 0.0


def parse_forward(text: str) -> tuple[str, int, str, int]:
    """``LISTEN_IP:PORT=TARGET_IP:PORT`` -> the four parts; ValueError with a readable line."""
    try:
        listen, target = text.split("=")
        (lhost, lport), (thost, tport) = (s.rsplit(":", 1) for s in (listen, target))
        ports = int(lport), int(tport)
    except ValueError:
        raise ValueError(f"--forward {text!r}: expected LISTEN_IP:PORT=TARGET_IP:PORT") from None
    if not all(0 < p < 65536 for p in ports) or not lhost or not thost:
        raise ValueError(f"--forward {text!r}: bad address or port")
    return lhost, ports[0], thost, ports[1]


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, bucket: TokenBucket) -> int:
    """Copy one direction at the bucket's rate until EOF; pass the EOF on. Bytes copied.

    Reads are at most one burst, so what leaves at once is never more than a burst either."""
    loop = asyncio.get_running_loop()
    moved = 0
    chunk = int(min(READ_BYTES, bucket.burst_bytes))
    try:
        while data := await reader.read(chunk):
            wait = bucket.take(len(data), loop.time())
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
            moved += len(data)
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.transport.abort()
    return moved


class Proxy:
    """Accepts on the public address, connects to the service, paces both directions."""

    def __init__(self, target: tuple[str, int], rate_bps: float, burst_bytes: float, verbose: bool = False) -> None:
        self.target = target
        self.verbose = verbose
        self.rate_bps = rate_bps
        self.burst_bytes = max(burst_bytes, 4096)

    async def handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            c_writer.transport.abort()
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            up, down = await asyncio.gather(
                _pump(c_reader, s_writer, TokenBucket(self.rate_bps, self.burst_bytes)),
                _pump(s_reader, c_writer, TokenBucket(self.rate_bps, self.burst_bytes)),
            )
            if self.verbose:
                peer = c_writer.get_extra_info("peername")
                print(f"{peer} -> {self.target[1]}: {up} B in, {down} B out, {loop.time() - started:.2f} s", flush=True)
        finally:
            for w in (c_writer, s_writer):
                w.close()


def listening_socket(host: str, port: int, rcvbuf: int) -> socket.socket:
    """A listener whose accepted sockets keep a small receive buffer (about the burst).

    Otherwise the kernel takes a whole file into the proxy's buffer at line rate before the
    bucket sees it: many connections then burst together into the lab's short queues, and
    their losses, not the cap, set the pace. A small window is also what a long round trip
    leaves a single TCP connection.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, max(rcvbuf, 16384))
    sock.bind((host, port))
    sock.listen(256)
    return sock


async def serve(forwards: list[tuple[str, int, str, int]], mbps: float, burst_kb: float, verbose: bool = False) -> None:
    servers = []
    for lhost, lport, thost, tport in forwards:
        proxy = Proxy((thost, tport), mbps * 1e6, burst_kb * 1024, verbose)
        servers.append(
            await asyncio.start_server(proxy.handle, sock=listening_socket(lhost, lport, int(burst_kb * 1024)))
        )
    print(
        f"wanproxy: {mbps:g} Mbit/s per connection each way, burst {burst_kb:g} KB: "
        + ", ".join(f"{a}:{b} -> {c}:{d}" for a, b, c, d in forwards),
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m viplanes.lab.wanproxy", description=__doc__.splitlines()[0])
    parser.add_argument("--forward", action="append", required=True, metavar="LISTEN_IP:PORT=TARGET_IP:PORT")
    parser.add_argument("--mbps", type=float, required=True, help="per connection, each way")
    parser.add_argument("--burst-kb", type=float, default=64.0)
    parser.add_argument("--verbose", action="store_true", help="one line per closed connection")
    args = parser.parse_args(argv)
    try:
        forwards = [parse_forward(f) for f in args.forward]
    except ValueError as exc:
        parser.error(str(exc))
    if not args.mbps > 0 or not args.burst_kb > 0:
        parser.error("--mbps and --burst-kb must be positive")
    try:
        asyncio.run(serve(forwards, args.mbps, args.burst_kb, args.verbose))
    except OSError as exc:
        print(f"wanproxy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
