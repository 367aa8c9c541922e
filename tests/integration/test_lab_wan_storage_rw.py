"""The storage model by direction, measured through the real proxy on loopback (no Mininet).

A write (PUT) holds a storage worker ``--request-ms``, a read (GET) ``--read-request-ms``, and
writes are admitted at most ``--write-rps`` a second, all connections together (the provider's
per-account write quota: docs/lab.md, "The WAN model"). The abuse: a PUT whose body looks like
a GET must still pay as a write, and the quota must hold across many connections at once.
"""

from __future__ import annotations

import http.client
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.integration.test_lab_wan_delay import free_port, running

pytestmark = pytest.mark.integration

OPTIONS = ("--mbps", "100", "--request-ms", "300", "--read-request-ms", "40", "--storage-workers", "8")


class _Store(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _ok(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_GET(self) -> None:
        self._ok()

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._ok()

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    request_queue_size = 64  # the default 5 drops SYNs of 10 connections at once (a 1 s retry)


@contextmanager
def store_behind_proxy(*options: str) -> Iterator[int]:
    server = _Server(("127.0.0.1", 0), _Store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_port()
    target = int(server.server_address[1])
    argv = [sys.executable, "-m", "viplanes.lab.wan.proxy", "--forward", f"127.0.0.1:{port}=127.0.0.1:{target}"]
    try:
        with running([*argv, *options, "--storage-port", str(port)], port):
            yield port
    finally:
        server.shutdown()


def timed(port: int, method: str, body: bytes | None = None) -> float:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, "/bucket/x", body=body)
        resp = conn.getresponse()
        assert resp.read() == b"ok"
    finally:
        conn.close()
    return time.monotonic() - started


def test_a_read_costs_its_own_service_time_and_a_write_its_own() -> None:
    with store_behind_proxy(*OPTIONS) as port:
        get = min(timed(port, "GET") for _ in range(3))
        put = min(timed(port, "PUT", b"x" * 1000) for _ in range(3))
        # the attack: a write dressed as a read inside its body is still a write
        disguised = timed(port, "PUT", b"GET /bucket/x HTTP/1.1\r\nHost: a\r\n\r\n")
    print(f"GET {get:.3f} s, PUT {put:.3f} s, PUT with a GET-looking body {disguised:.3f} s")
    assert 0.035 <= get <= 0.15, get
    assert 0.29 <= put <= 0.45, put
    assert 0.29 <= disguised <= 0.6, disguised


def test_the_write_quota_holds_across_connections_and_spares_reads() -> None:
    with store_behind_proxy(*OPTIONS, "--write-rps", "5") as port, ThreadPoolExecutor(10) as pool:
        started = time.monotonic()
        list(pool.map(lambda _: timed(port, "PUT", b"x" * 100), range(10)))
        writes = time.monotonic() - started
        started = time.monotonic()
        list(pool.map(lambda _: timed(port, "GET"), range(10)))
        reads = time.monotonic() - started
    print(f"10 PUTs on 10 connections {writes:.2f} s, 10 GETs {reads:.2f} s")
    # 10 writes at 5 a second: the last admitted 1.8 s after the first, then 0.3 s of service
    assert 1.9 <= writes <= 3.0, writes
    assert reads <= 0.5, reads  # 10 reads, 8 workers, 40 ms each: two rounds, no quota
