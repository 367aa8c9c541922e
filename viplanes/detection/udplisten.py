"""One UDP socket and one thread that hands each datagram to a ``DatagramHandler``: the firefly
listener and the sFlow gate both take unauthenticated datagrams this way, so the socket's timeout
(how soon ``stop`` is seen) and the shutdown order live in one place. Each of them holds a
``UdpListener`` and is its handler; neither inherits from it."""

from __future__ import annotations

import socket
import threading
from typing import Protocol


class DatagramHandler(Protocol):
    """What the listener calls for every datagram it receives."""

    def receive(self, data: bytes, source: str) -> object:
        """One datagram from ``source`` (its address, without the port); the answer is ignored."""
        ...


class UdpListener:
    """Binds ``(host, port)`` at construction (a taken port fails there, before any thread);
    ``start`` runs the receive loop on a daemon thread named ``thread_name``, handing each datagram
    of at most ``recv_size`` bytes to ``handler``."""

    def __init__(self, host: str, port: int, thread_name: str, recv_size: int, handler: DatagramHandler) -> None:
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.bind((host, port))
        except OSError:
            self._sock.close()
            raise
        self._sock.settimeout(0.5)
        self.address = self._sock.getsockname()
        self._handler = handler
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
            self._handler.receive(data, addr[0])
