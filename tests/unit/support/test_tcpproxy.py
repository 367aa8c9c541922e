"""The freezable proxy (tests/support/tcpproxy.py) forwards, freezes, and leaves no thread behind
once closed: its accept thread outlived ``close()`` (a close alone does not wake ``accept``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.tcpproxy import freezable_proxy


def _proxy_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tcpproxy") and t.is_alive()]


@contextmanager
def _echo() -> Iterator[int]:
    """One connection echoed back, on a port of its own."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()
        thread.join(5)


def test_a_closed_proxy_leaves_no_thread_running() -> None:
    assert _proxy_threads() == []
    with _echo() as port, freezable_proxy(port) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
            client.sendall(b"ping")
            assert client.recv(4) == b"ping"
            proxy.freeze()
            client.sendall(b"held")
            client.settimeout(0.5)
            try:
                got = client.recv(4)
            except TimeoutError:
                got = b""
            assert got == b"", "a frozen proxy forwarded"
            proxy.thaw()
            client.settimeout(5)
            assert client.recv(4) == b"held"
        assert _proxy_threads() != []
    assert _proxy_threads() == [], "the proxy's threads outlived close()"
