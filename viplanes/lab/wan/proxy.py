"""The lab's WAN model: a pacing TCP proxy on the cloud host, one token bucket per connection.

A real WAN caps each TCP connection: its window over a long round trip, and cloud endpoints that
throttle each connection. This kernel has no netem (no delay) and no fq, and tc police does not
load, so the cap is made in userspace instead: the cloud's services listen on the cloud host's
loopback, and this proxy listens on its public address in front of them. Every accepted
connection is forwarded in both directions, each direction through its own token bucket at
``--mbps`` (or ``--up-mbps`` / ``--down-mbps``). Reading stops while a bucket is empty, so TCP's
own flow control pushes back on the sender: a client sees a slow connection, never an error.
With ``--rtt-ms`` each direction is also a delay line (half the round trip each way, at most
``--window-kb`` in flight), and with ``--request-ms`` the HTTP requests on ``--storage-port``
wait for one of ``--storage-workers`` shared by every connection (`model.py`). An
``--endpoint PORTS=...`` gives some listen ports a server of their own (`endpoint.py`): its
per-connection caps, and optionally one bucket per direction that all its connections share.

    python -m viplanes.lab.wan.proxy --mbps 10 --up-mbps 6 --down-mbps 16 --rtt-ms 300 \
        --request-ms 500 --storage-port 9000 --forward 203.0.113.10:9000=127.0.0.1:9000

`TokenBucket`, `DelayLine` and `RequestFramer` are pure (the clock is passed in); the asyncio
glue only reads, waits and writes.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
import time
from dataclasses import dataclass

from .endpoint import EndpointShape, parse_endpoint
from .model import DelayLine, RequestFramer, is_read

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


class StorageQueue:
    """The cloud's storage: ``workers`` shared by every connection, each request holding one
    for ``request_s`` before the service sees it (seed 001's per-request cost and shared queue);
    a read (GET, HEAD) holds it ``read_s`` instead (a cache or first replica, not a durable write).
    With ``write_rps`` the account's writes are admitted at most that many a second, all
    connections together (a provider's per-account write quota), before they queue for a worker."""

    def __init__(self, request_s: float, workers: int, read_s: float | None = None, write_rps: float = 0.0) -> None:
        self.request_s = request_s
        self.read_s = request_s if read_s is None else read_s
        self.write_rps = write_rps
        self._slots = asyncio.Semaphore(workers)
        self._quota = TokenBucket(write_rps * 8, 1.0) if write_rps > 0 else None  # one "byte" per write

    async def serve(self, head: bytes = b"") -> None:
        """Hold a worker for the service time of the request that ``head`` begins."""
        read = is_read(head)
        if not read and self._quota is not None:
            wait = self._quota.take(1, asyncio.get_running_loop().time())
            if wait > 0:
                await asyncio.sleep(wait)
        async with self._slots:
            await asyncio.sleep(self.read_s if read else self.request_s)


@dataclass
class Direction:
    """How one direction of a connection is shaped: its rate, and optionally its round trip
    (a `DelayLine`) and the storage queue its requests wait in (client -> cloud only)."""

    bucket: TokenBucket
    line: DelayLine | None = None
    framer: RequestFramer | None = None
    storage: StorageQueue | None = None
    shared: TokenBucket | None = None  # the endpoint's NIC: every connection to it draws here too

    def charge(self, nbytes: int, now: float) -> float:
        """Charge both buckets; the longer wait is the one that holds."""
        wait = self.bucket.take(nbytes, now)
        return max(wait, self.shared.take(nbytes, now)) if self.shared is not None else wait


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, how: Direction) -> int:
    """Copy one direction at the bucket's rate until EOF; pass the EOF on. Bytes copied."""
    if how.line is None and how.storage is None:
        return await _pump_direct(reader, writer, how)
    return await _pump_delayed(reader, writer, how)


async def _pump_direct(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, how: Direction) -> int:
    """Reads are at most one burst, so what leaves at once is never more than a burst either."""
    loop = asyncio.get_running_loop()
    moved = 0
    chunk = int(min(READ_BYTES, how.bucket.burst_bytes))
    try:
        while data := await reader.read(chunk):
            wait = how.charge(len(data), loop.time())
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


async def _pump_delayed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, how: Direction) -> int:
    """The same through a delay line: a reader paces and stamps each piece with the time it may
    leave; a writer waits for that time (and, for a request's first piece, a storage worker)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes, bool] | None] = asyncio.Queue(maxsize=256)
    chunk = int(min(READ_BYTES, how.bucket.burst_bytes))

    async def send() -> int:
        sent = 0
        while (item := await queue.get()) is not None:
            due, data, starts = item
            if (delay := due - loop.time()) > 0:
                await asyncio.sleep(delay)
            if starts and how.storage is not None:
                await how.storage.serve(data)
            writer.write(data)
            await writer.drain()
            sent += len(data)
        if writer.can_write_eof():
            writer.write_eof()
        return sent

    sender = asyncio.ensure_future(send())
    try:
        while True:
            if how.line is not None:
                while (wait := how.line.wait_for_room(loop.time())) > 0:
                    await asyncio.sleep(wait)
                room = int(how.line.room(loop.time()))
                data = await reader.read(max(1024, min(chunk, room)))
            else:
                data = await reader.read(chunk)
            if not data or sender.done():
                break
            pieces = how.framer.feed(data) if how.framer is not None else [(data, False)]
            for piece, starts in pieces:
                wait = how.charge(len(piece), loop.time())
                if wait > 0:
                    await asyncio.sleep(wait)
                now = loop.time()
                due = how.line.push(len(piece), now) if how.line is not None else now
                await queue.put((due, piece, starts))
        if not sender.done():
            await queue.put(None)
        return await sender
    except (ConnectionError, OSError):
        if sender.done() and not sender.cancelled():
            sender.exception()  # retrieved: the connection is gone either way
        sender.cancel()
        writer.transport.abort()
        return 0


@dataclass(frozen=True)
class Shape:
    """The WAN model's settings for one proxy (docs/lab.md, "The WAN model")."""

    up_bps: float
    down_bps: float
    burst_bytes: float
    rtt_s: float = 0.0
    window_bytes: float = 4096 * 1024

    def directions(
        self, storage: StorageQueue | None, shared: tuple[TokenBucket, TokenBucket] | None = None
    ) -> tuple[Direction, Direction]:
        """Fresh (upload, download) shaping for one new connection; ``shared``: its endpoint's
        (upload, download) buckets, the same objects for every connection to the endpoint."""

        def line() -> DelayLine | None:
            return DelayLine(self.rtt_s, self.window_bytes) if self.rtt_s > 0 else None

        up = Direction(TokenBucket(self.up_bps, self.burst_bytes), line())
        down = Direction(TokenBucket(self.down_bps, self.burst_bytes), line())
        if shared is not None:
            up.shared, down.shared = shared
        if storage is not None:
            up.framer, up.storage = RequestFramer(), storage
        return up, down

    def for_endpoint(self, e: EndpointShape) -> Shape:
        """This shape with the endpoint's per-connection caps where it has its own."""
        up = self.up_bps if e.up_mbps is None else e.up_mbps * 1e6
        down = self.down_bps if e.down_mbps is None else e.down_mbps * 1e6
        return Shape(up, down, self.burst_bytes, self.rtt_s, self.window_bytes)


def shared_buckets(e: EndpointShape, burst_bytes: float) -> tuple[TokenBucket, TokenBucket] | None:
    """The endpoint's NIC, one bucket each way, or None when it has no total."""
    if e.total_mbps is None:
        return None
    return TokenBucket(e.total_mbps * 1e6, burst_bytes), TokenBucket(e.total_mbps * 1e6, burst_bytes)


class Proxy:
    """Accepts on the public address, connects to the service, paces both directions."""

    def __init__(
        self,
        target: tuple[str, int],
        shape: Shape,
        storage: StorageQueue | None = None,
        verbose: bool = False,
        shared: tuple[TokenBucket, TokenBucket] | None = None,
    ) -> None:
        self.target = target
        self.verbose = verbose
        self.shape = Shape(shape.up_bps, shape.down_bps, max(shape.burst_bytes, 4096), shape.rtt_s, shape.window_bytes)
        self.storage = storage
        self.shared = shared

    async def handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            c_writer.transport.abort()
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        up_how, down_how = self.shape.directions(self.storage, self.shared)
        try:
            up, down = await asyncio.gather(_pump(c_reader, s_writer, up_how), _pump(s_reader, c_writer, down_how))
            if self.verbose:
                peer = c_writer.get_extra_info("peername")
                took = loop.time() - started
                at = time.strftime("%H:%M:%S", time.localtime(time.time() - took))  # when it opened
                print(f"{at} {peer} -> {self.target[1]}: {up} B in, {down} B out, {took:.2f} s", flush=True)
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


async def serve(
    forwards: list[tuple[str, int, str, int]],
    shape: Shape,
    storage_ports: tuple[int, ...] = (),
    storage: StorageQueue | None = None,
    verbose: bool = False,
    endpoints: tuple[EndpointShape, ...] = (),
) -> None:
    """Proxy every forward until SIGTERM or SIGINT; listen ports in ``storage_ports`` carry
    HTTP requests that wait in the (one, shared) ``storage`` queue; a port of an endpoint gets
    its caps and its shared buckets (one pair per endpoint, whatever its address)."""
    servers = []
    nics = {e: shared_buckets(e, shape.burst_bytes) for e in endpoints}
    for lhost, lport, thost, tport in forwards:
        e = next((e for e in endpoints if lport in e.ports), None)
        own = shape.for_endpoint(e) if e is not None else shape
        queue_of = storage if lport in storage_ports else None
        proxy = Proxy((thost, tport), own, queue_of, verbose, nics[e] if e is not None else None)
        sock = listening_socket(lhost, lport, int(shape.burst_bytes))
        servers.append(await asyncio.start_server(proxy.handle, sock=sock))
    queue = (
        f", storage {storage.request_s * 1000:g} ms a write, {storage.read_s * 1000:g} ms a read, "
        f"{storage.write_rps:g} writes/s (0: no quota) on ports {storage_ports}"
        if storage
        else ""
    )
    print(
        f"wanproxy: {shape.up_bps / 1e6:g} Mbit/s up, {shape.down_bps / 1e6:g} down per connection, "
        f"burst {shape.burst_bytes / 1024:g} KB, rtt {shape.rtt_s * 1000:g} ms{queue}: "
        + ", ".join(f"{a}:{b} -> {c}:{d}" for a, b, c, d in forwards)
        + "".join(f"; endpoint {e.text()}" for e in endpoints),
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
    parser = argparse.ArgumentParser(prog="python -m viplanes.lab.wan.proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--forward", action="append", required=True, metavar="LISTEN_IP:PORT=TARGET_IP:PORT")
    parser.add_argument("--mbps", type=float, required=True, help="per connection, each way")
    parser.add_argument("--up-mbps", type=float, help="per connection, client to service (default --mbps)")
    parser.add_argument("--down-mbps", type=float, help="per connection, service to client (default --mbps)")
    parser.add_argument("--burst-kb", type=float, default=64.0)
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="round trip; half is added each way")
    parser.add_argument("--window-kb", type=float, default=4096.0, help="bytes in flight per direction")
    parser.add_argument("--request-ms", type=float, default=0.0, help="storage service time per request")
    parser.add_argument(
        "--read-request-ms", type=float, default=None, help="storage service time per GET/HEAD (default --request-ms)"
    )
    parser.add_argument("--storage-workers", type=int, default=8, help="requests served at once")
    parser.add_argument(
        "--write-rps", type=float, default=0.0, help="writes admitted a second, all connections (0: no quota)"
    )
    parser.add_argument("--storage-port", type=int, action="append", default=[], help="listen port carrying S3")
    parser.add_argument(
        "--endpoint", action="append", default=[], metavar="PORTS=KEY:MBPS,...", help="a server of its own"
    )
    parser.add_argument("--verbose", action="store_true", help="one line per closed connection")
    args = parser.parse_args(argv)
    try:
        forwards = [parse_forward(f) for f in args.forward]
        endpoints = tuple(parse_endpoint(e) for e in args.endpoint)
    except ValueError as exc:
        parser.error(str(exc))
    claimed = [p for e in endpoints for p in e.ports]
    if len(claimed) != len(set(claimed)):
        parser.error("--endpoint: a port belongs to one endpoint at most")
    up = args.mbps if args.up_mbps is None else args.up_mbps
    down = args.mbps if args.down_mbps is None else args.down_mbps
    if not min(args.mbps, up, down, args.burst_kb, args.window_kb, args.storage_workers) > 0:
        parser.error("--mbps, --up-mbps, --down-mbps, --burst-kb, --window-kb and --storage-workers must be positive")
    read_ms = args.request_ms if args.read_request_ms is None else args.read_request_ms
    if not (args.rtt_ms >= 0 and args.request_ms >= 0 and read_ms >= 0 and args.write_rps >= 0):
        parser.error("--rtt-ms, --request-ms, --read-request-ms and --write-rps must be 0 or more")
    shape = Shape(up * 1e6, down * 1e6, args.burst_kb * 1024, args.rtt_ms / 1000, args.window_kb * 1024)
    timed = args.request_ms > 0 or read_ms > 0 or args.write_rps > 0
    storage = (
        StorageQueue(args.request_ms / 1000, args.storage_workers, read_ms / 1000, args.write_rps) if timed else None
    )
    try:
        asyncio.run(serve(forwards, shape, tuple(args.storage_port), storage, args.verbose, endpoints))
    except OSError as exc:
        print(f"wanproxy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
