"""A TCP proxy that can be frozen: a partition between one client and a server.

``freeze()`` stops forwarding in both directions but keeps every socket open, so the client's
kernel sees its data acknowledged by the proxy and waits for an answer that never comes, as
behind a firewall that drops a flow's packets once it is established. New connections are
accepted and then frozen too. ``thaw()`` forwards again (what was held is delivered).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Iterator


class FreezableProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, name="tcpproxy-accept", daemon=True).start()

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
            self._socks += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

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
        self._stop.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.close()


@contextlib.contextmanager
def freezable_proxy(target_port: int) -> Iterator[FreezableProxy]:
    proxy = FreezableProxy(target_port)
    try:
        yield proxy
    finally:
        proxy.close()
