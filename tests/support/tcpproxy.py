"""A TCP proxy that can be frozen: a partition between one client and a server.

``freeze()`` stops forwarding in both directions but keeps every socket open, so the client's
kernel sees its data acknowledged by the proxy and waits for an answer that never comes, as
behind a firewall that drops a flow's packets once it is established. New connections are
accepted and then frozen too. ``thaw()`` forwards again (what was held is delivered).
``close()`` ends and joins every thread of the proxy (use it as a context manager).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator
from types import TracebackType

JOIN_S = 5.0  # a pump notices the stop within its 0.2 s select


class FreezableProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # the accept thread adds sockets and pumps, close() ends them
        self._spawn(self._accept, "tcpproxy-accept")

    def __enter__(self) -> FreezableProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _spawn(self, target: Callable[..., None], name: str, *args: socket.socket) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._flowing.wait()  # a new connection during a freeze waits too (TCP accepted, no bytes)
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                stopped = self._stop.is_set()
                if not stopped:
                    self._socks += [client, server]
            if stopped:  # close() ran while this one connected: it is not the proxy's any more
                client.close()
                server.close()
                return
            self._spawn(self._pump, "tcpproxy-pump", client, server)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while not self._stop.is_set():
                self._flowing.wait()
                ready, _, _ = select.select(list(peers), [], [], 0.2)
                if not self._flowing.is_set():
                    continue  # frozen between select and read: hold the bytes in the kernel
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except OSError:
            pass
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()

    def close(self) -> None:
        """Stop forwarding, close every socket and join every thread. ``shutdown`` first: on
        Linux a ``close`` alone does not wake a thread blocked in ``accept`` (it lived on)."""
        with self._lock:
            self._stop.set()
            socks = list(self._socks)
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()
        self._threads[0].join(JOIN_S)  # the accept thread: no pump starts after it ended
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(JOIN_S)


@contextlib.contextmanager
def freezable_proxy(target_port: int) -> Iterator[FreezableProxy]:
    with FreezableProxy(target_port) as proxy:
        yield proxy
