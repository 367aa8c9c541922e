"""The API server's promises (viplanes/cli/apiserver.py), against the real server on loopback:
keep-alive, a body limit, a connection limit, silent clients that cost no thread, and a stop that
lets in-flight requests finish."""

from __future__ import annotations

import io
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from viplanes import pki
from viplanes.cli.apiserver import ApiServer, ServerLimits, create_api_server, read_at_most
from viplanes.cli.https import server_context

LIMIT = 256 * 1024
CLOSE = {"Connection": "close"}  # the server closes the connection after its answer (see below)


def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Answers with the client's port (same port twice: one kept-alive connection); /slow sleeps 1 s."""
    if environ["PATH_INFO"] == "/slow":
        time.sleep(1.0)
    environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(environ["REMOTE_PORT"]).encode()]


def serving(limits: ServerLimits, tls: ssl.SSLContext | None = None) -> tuple[ApiServer, threading.Thread]:
    server = create_api_server(app, "127.0.0.1", 0, tls, limits)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def server() -> Iterator[ApiServer]:
    s, thread = serving(ServerLimits(threads=2, max_connections=4, timeout_s=5))
    yield s
    s.stop()
    thread.join(10)


def test_keep_alive_serves_a_session_on_one_connection(server: ApiServer) -> None:
    with requests.Session() as s:
        ports = {s.get(f"http://127.0.0.1:{server.port}/").text for _ in range(5)}
    assert len(ports) == 1


def test_a_body_over_the_limit_is_refused_before_the_app(server: ApiServer) -> None:
    r = requests.post(f"http://127.0.0.1:{server.port}/", data=b"x" * (ServerLimits().max_body_bytes + 1), timeout=10)
    assert r.status_code == 413


def test_connections_beyond_the_limit_are_closed_at_once(server: ApiServer) -> None:
    silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
    try:
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", server.port))
        extra.settimeout(3)
        try:
            assert extra.recv(1) == b""  # closed by the server, not left to wait
        except ConnectionResetError:
            pass
        extra.close()
    finally:
        for s in silent:
            s.close()
    deadline = time.monotonic() + 5
    while True:  # the server sees the silent ones close and frees their places
        try:
            assert requests.get(f"http://127.0.0.1:{server.port}/", timeout=2).ok
            break
        except requests.ConnectionError:
            assert time.monotonic() < deadline, "the server did not free the closed connections' places"
            time.sleep(0.2)


def test_silent_tls_clients_hold_no_thread(tmp_path: Path) -> None:
    """The attack: connections that never send their ClientHello. With one thread, a handshake on
    the accepting thread or a thread per waiting connection would starve the real client."""
    pki.init(tmp_path, hosts=("127.0.0.1",))
    tls = server_context(tmp_path / "controller.crt", tmp_path / "controller.key")
    s, thread = serving(ServerLimits(threads=1, timeout_s=10), tls)
    silent = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(3)]
    try:
        t0 = time.monotonic()
        r = requests.get(f"https://127.0.0.1:{s.port}/", verify=str(tmp_path / "ca.crt"), timeout=8)
        assert r.ok and time.monotonic() - t0 < 3
    finally:
        for c in silent:
            c.close()
        s.stop()
        thread.join(10)


def test_stop_lets_the_request_in_flight_finish(server: ApiServer) -> None:
    answers: list[int] = []
    client = threading.Thread(
        target=lambda: answers.append(requests.get(f"http://127.0.0.1:{server.port}/slow", timeout=10).status_code)
    )
    client.start()
    time.sleep(0.3)  # the request is in the app
    t0 = time.monotonic()
    server.stop()
    client.join(10)
    assert answers == [200]
    assert time.monotonic() - t0 < ServerLimits().shutdown_s
    with pytest.raises(requests.ConnectionError):  # and nothing new is accepted
        requests.get(f"http://127.0.0.1:{server.port}/", timeout=2)


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_stop_closes_an_idle_keep_alive_connection_at_once(tmp_path: Path, tls: bool) -> None:
    """After a chunked upload, the body's last CRLF is still unread, so the kept-alive connection
    goes back to a worker thread, which waits on it for a next request line: stop() waited the
    whole shutdown_s (10 s) for that worker."""
    context, verify, scheme = None, False, "http"
    if tls:
        pki.init(tmp_path, hosts=("127.0.0.1",))
        context = server_context(tmp_path / "controller.crt", tmp_path / "controller.key")
        verify, scheme = str(tmp_path / "ca.crt"), "https"
    s, thread = serving(ServerLimits(threads=2), context)

    def body() -> Iterator[bytes]:
        yield b"a" * 100

    with requests.Session() as session:
        assert session.post(f"{scheme}://127.0.0.1:{s.port}/", data=body(), timeout=10, verify=verify).ok
        time.sleep(0.3)  # the connection is idle, held by a worker
        t0 = time.monotonic()
        s.stop()
        took = time.monotonic() - t0
    thread.join(10)
    assert took < 2, f"stop() took {took:.1f} s with an idle keep-alive client (shutdown_s {ServerLimits().shutdown_s})"


def test_a_chunked_body_reaches_flask_with_its_length() -> None:
    """A chunked body over the app's MAX_CONTENT_LENGTH is 413, not a body cut at the limit and
    read as bad JSON (cheroot streams chunked bodies without a length; waitress set one)."""
    from flask import Flask, request

    flask_app = Flask("chunked")
    flask_app.config["MAX_CONTENT_LENGTH"] = 64 * 1024

    @flask_app.post("/")
    def echo() -> dict[str, int]:
        return {"n": len(request.get_data())}

    server = create_api_server(flask_app, "127.0.0.1", 0, None, ServerLimits(threads=2, max_body_bytes=256 * 1024))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.port}/"

    def chunks(n: int) -> Iterator[bytes]:
        for _ in range(n):
            yield b"a" * 4096

    try:
        assert requests.post(url, data=chunks(2), timeout=10, headers=CLOSE).json() == {"n": 8192}
        assert (
            requests.post(url, data=chunks(50), timeout=10, headers=CLOSE).status_code == 413
        )  # over the app's 64 KiB
        r = requests.post(url, data=chunks(100), timeout=10, headers=CLOSE)  # over the server's own 256 KiB
        assert r.status_code == 413 and r.json()["error"] == "too_large"
    finally:
        server.stop()
        thread.join(10)


@pytest.mark.parametrize(("body", "status"), [(LIMIT - 1, 200), (LIMIT, 200), (LIMIT + 1, 413)])
def test_a_chunked_body_is_counted_against_the_limit_not_its_framing(body: int, status: int) -> None:
    """The body's own bytes are counted (``read_at_most``), not cheroot's count of the wire, which
    includes every chunk-size line: 64 chunks of 4 KiB carry 384 bytes of framing, and a body just
    under the limit was refused 413."""
    server, thread = serving(ServerLimits(threads=2, max_body_bytes=LIMIT))

    def chunks() -> Iterator[bytes]:
        left = body
        while left:
            yield b"a" * min(4096, left)
            left -= min(4096, left)

    try:
        r = requests.post(f"http://127.0.0.1:{server.port}/", data=chunks(), timeout=10, headers=CLOSE)
        assert r.status_code == status, r.text[:200]
        if status == 413:
            assert r.headers["Content-Type"] == "application/json" and r.json()["error"] == "too_large"
            assert str(LIMIT) in r.json()["message"]
    finally:
        server.stop()
        thread.join(10)


def test_a_length_over_the_limit_is_413_in_json(server: ApiServer) -> None:
    limit = ServerLimits().max_body_bytes
    r = requests.post(f"http://127.0.0.1:{server.port}/", data=b"x" * (limit + 1), timeout=10)
    assert r.status_code == 413 and r.json() == {
        "error": "too_large",
        "message": f"the request body is over {limit} bytes",
    }


def test_read_at_most_stops_one_byte_past_the_limit() -> None:
    class Counting(io.BytesIO):
        asked = 0

        def read(self, size: int | None = -1) -> bytes:
            data = super().read(size)
            self.asked += len(data)
            return data

    assert read_at_most(io.BytesIO(b"x" * 10), 10) == b"x" * 10
    assert read_at_most(io.BytesIO(b""), 10) == b""
    big = Counting(b"x" * 1000)
    assert read_at_most(big, 10, piece=3) is None and big.asked == 11
