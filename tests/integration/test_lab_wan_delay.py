"""The WAN model's round trip, asymmetric caps and storage queue, measured through the real proxy.

The proxy (`python -m viplanes.lab.wan.proxy`) runs on loopback in front of an echo server,
`iperf3 -s` and an HTTP server: no Mininet, so the numbers are the proxy's alone. Without the
delay line a request-response loop takes well under a millisecond and both directions run at
one cap; without the storage queue eight concurrent requests finish together.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.request import urlopen

import pytest

from tests.support.procs import free_port

pytestmark = pytest.mark.integration


def listening(port: int) -> bool:
    """Whether a socket listens on ``port``, without connecting (iperf3 would count a probe as
    a client, and a probe through the proxy would reach the service too)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if listening(port):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


@contextmanager
def running(argv: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def proxy(target: int, *options: str) -> Iterator[int]:
    port = free_port()
    argv = [sys.executable, "-m", "viplanes.lab.wan.proxy", "--forward", f"127.0.0.1:{port}=127.0.0.1:{target}"]
    with running([*argv, *options], port):
        yield port


@contextmanager
def echo_server() -> Iterator[int]:
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    thread = threading.Thread(target=serve, name="echo-server", daemon=True)
    thread.start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        with suppress(OSError):  # a close alone does not wake the thread in accept()
            srv.shutdown(socket.SHUT_RDWR)
        srv.close()
        thread.join(5)


def round_trips(port: int, n: int = 5) -> list[float]:
    out = []
    with socket.create_connection(("127.0.0.1", port)) as c:
        for _ in range(n):
            started = time.monotonic()
            c.sendall(b"ping")
            got = b""
            while len(got) < 4:
                got += c.recv(4)
            out.append(time.monotonic() - started)
    return out


def test_a_request_response_loop_sees_the_round_trip() -> None:
    with echo_server() as echo, proxy(echo, "--mbps", "10", "--rtt-ms", "120") as port:
        rtts = round_trips(port)
    print("rtt s", [round(r, 4) for r in rtts])
    # each exchange pays 60 ms each way: never under 120 ms; over it by the machine's scheduling,
    # which on a loaded machine can stretch any one exchange, so the best of five must be within
    # 25 ms of it (a delay paid twice reads 240)
    assert all(r >= 0.118 for r in rtts) and min(rtts) <= 0.145, rtts


BUSY = "the server is busy running a test"  # iperf3 -s still ending the last test (seen once)


def iperf(port: int, reverse: bool, seconds: int = 2, streams: int = 1, busy_s: float = 10.0) -> float:
    """Mbit/s received. A server still ending the previous test refuses the next one as busy;
    that is the iperf3 server's state, not the proxy under test, so the client tries again."""
    argv = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-P", str(streams), "-J"]
    deadline = time.monotonic() + busy_s
    while True:
        out = subprocess.run([*argv, *(["-R"] if reverse else [])], capture_output=True, text=True, timeout=30)
        result = json.loads(out.stdout)
        if BUSY not in result.get("error", "") or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    assert "error" not in result, result["error"]
    return float(result["end"]["sum_received"]["bits_per_second"]) / 1e6


def measure(reverse: bool, *options: str) -> float:
    """One iperf3 run through a fresh proxy in front of a fresh iperf3 server."""
    iperf_port = free_port()
    server = ["iperf3", "-s", "-B", "127.0.0.1", "-p", str(iperf_port)]
    with running(server, iperf_port), proxy(iperf_port, *options) as port:
        return iperf(port, reverse)


def test_upload_and_download_follow_their_own_caps_and_window_over_rtt() -> None:
    caps = ("--mbps", "10", "--up-mbps", "4", "--down-mbps", "12", "--rtt-ms", "40")
    up, down = measure(False, *caps), measure(True, *caps)
    # 32 KB in flight over a 100 ms round trip: 2.6 Mbit/s, whatever the 10 Mbit/s cap says
    windowed = measure(False, "--mbps", "10", "--rtt-ms", "100", "--window-kb", "32")
    print(f"up {up:.2f} down {down:.2f} windowed {windowed:.2f} Mbit/s")
    assert 0.85 * 4 <= up <= 1.1 * 4, up
    assert 0.85 * 12 <= down <= 1.1 * 12, down
    assert 0.7 * 2.62 <= windowed <= 1.1 * 2.62, windowed


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_concurrent_requests_queue_for_the_storage_workers() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    serving = threading.Thread(target=server.serve_forever, name="storage-server", daemon=True)
    serving.start()
    try:
        target = int(server.server_address[1])
        options = ("--mbps", "50", "--request-ms", "200", "--storage-workers", "2")
        port = free_port()
        argv = [sys.executable, "-m", "viplanes.lab.wan.proxy", "--forward", f"127.0.0.1:{port}=127.0.0.1:{target}"]
        with running([*argv, *options, "--storage-port", str(port)], port):

            def get(_: int) -> float:
                started = time.monotonic()
                with urlopen(f"http://127.0.0.1:{port}/x", timeout=20) as resp:
                    assert resp.read() == b"ok"
                return time.monotonic() - started

            one = get(0)
            with ThreadPoolExecutor(8) as pool:
                started = time.monotonic()
                list(pool.map(get, range(8)))
                eight = time.monotonic() - started
    finally:
        server.shutdown()  # serve_forever returns
        server.server_close()
        serving.join(5)
    print(f"one request {one:.3f} s, eight at once {eight:.3f} s")
    assert 0.19 <= one <= 0.35, one  # one service time
    assert 0.78 <= eight <= 1.2, eight  # 8 requests / 2 workers x 200 ms
