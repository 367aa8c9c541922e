"""One UDP socket and one thread that hands each datagram to ``receive``: the firefly listener and
the sFlow gate both take unauthenticated datagrams this way, so the socket's timeout (how soon
``stop`` is seen) and the shutdown order live in one place."""

from __future__ import annotations

import socket
import threading


class UdpListener:
    """Binds ``(host, port)`` at construction (a taken port fails there, before any thread);
    ``start`` runs the receive loop on a daemon thread named ``thread_name``."""

    def __init__(self, host: str, port: int, thread_name: str, recv_size: int) -> None:
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, port))
        self._sock.settimeout(0.5)
        self.address = self._sock.getsockname()
        self._thread_name = thread_name
        self._recv_size = recv_size
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()

    def receive(self, data: bytes, source: str) -> object:
        """One datagram from ``source`` (its address, without the port)."""
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self._sock.recvfrom(self._recv_size)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            self.receive(data, addr[0])
