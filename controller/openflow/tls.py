"""OpenFlow over TLS for our listener: the server context and a socket-like TLS channel.

Why not ``ssl.SSLSocket``: os-ken's ``Datapath`` reads on one native thread and writes on another,
and one OpenSSL ``SSL`` object must not be used by two threads at once (TLS 1.3 reads may write:
tickets, key updates). ``TLSChannel`` runs the TLS state machine on memory BIOs under a lock and
does the socket I/O itself, so the reader and the writer never touch OpenSSL concurrently.

The context requires TLS 1.2+, a client certificate signed by the campus CA, and presents the
controller's certificate. Its files are re-read when they change on disk (``viplanes pki rotate
controller``): connections already up keep their session, the next one gets the new certificate.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

READ = 65536


@dataclass(frozen=True)
class TLSFiles:
    ca: Path
    cert: Path
    key: Path


class ContextSource:
    """The server SSLContext, rebuilt when a file's mtime changes (certificate rotation)."""

    def __init__(self, files: TLSFiles) -> None:
        self.files = files
        self._lock = threading.Lock()
        self._stamp: tuple[float, ...] = ()
        self._context: ssl.SSLContext | None = None
        self.get()  # fail at start, not at the first switch

    def _mtimes(self) -> tuple[float, ...]:
        return tuple(os.stat(p).st_mtime_ns for p in (self.files.ca, self.files.cert, self.files.key))

    def get(self) -> ssl.SSLContext:
        with self._lock:
            try:
                stamp = self._mtimes()
            except OSError:
                stamp = self._stamp  # a file replaced right now: keep the last good context
            if self._context is None or stamp != self._stamp:
                self._context = server_context(self.files)
                self._stamp = stamp
            return self._context


def server_context(files: TLSFiles) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(str(files.cert), str(files.key))
    ctx.load_verify_locations(cafile=str(files.ca))
    ctx.options |= getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    return ctx


def readable(sock: Any, timeout_s: float | None) -> bool:
    """Bytes (or end of stream, or an error) on ``sock`` within ``timeout_s``. ``poll``, not
    ``select``: a controller with a thousand descriptors open must not fail on FD_SETSIZE."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(None if timeout_s is None else timeout_s * 1000))


class TLSChannel:
    """A TLS server connection with the socket methods os-ken's ``Datapath`` uses."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.raw = sock
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._in, self._out, server_side=True)
        self._lock = threading.Lock()  # the SSLObject
        self._wlock = threading.Lock()  # order of bytes on the wire; taken before _lock
        self.timeout: float | None = None

    # ---- handshake (one thread, before the Datapath exists) -----------------------------------
    def handshake(self, timeout_s: float) -> None:
        """Finish the TLS handshake or raise (ssl.SSLError, OSError, TimeoutError)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.tls.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("TLS handshake timed out") from None
                self.raw.settimeout(left)
                try:
                    data = self.raw.recv(READ)
                except TimeoutError:
                    raise TimeoutError("TLS handshake timed out") from None
                if not data:
                    raise ConnectionError("peer closed during the TLS handshake") from None  # want-read is no cause
                self._in.write(data)
            except ssl.SSLError:
                self._flush_quietly()  # let the peer see the alert
                raise

    def peer_cert_der(self) -> bytes | None:
        return self.tls.getpeercert(binary_form=True)

    # ---- socket API used by Datapath ---------------------------------------------------------
    def setsockopt(self, *args: Any) -> None:
        self.raw.setsockopt(*args)

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.raw.settimeout(timeout)

    def readable_within(self, timeout_s: float | None) -> bool:
        """Whether ``recv`` has something to return (plaintext or records already read, or
        bytes on the socket) within ``timeout_s``: a reader waits here without the socket's
        timeout, which also bounds the writer's ``sendall``."""
        with self._lock:
            if self.tls.pending() or self._in.pending:
                return True
        return readable(self.raw, timeout_s)

    def recv(self, size: int) -> bytes:
        """Decrypted bytes; b"" at end of stream; socket.timeout like a socket."""
        while True:
            with self._lock:
                try:
                    data = self.tls.read(size)
                    return data
                except ssl.SSLWantReadError:
                    pending = self._out.pending
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    return b""
            if pending:
                self._flush()
            raw = self.raw.recv(READ)  # raises socket.timeout / OSError like a plain socket
            if not raw:
                return b""
            with self._lock:
                self._in.write(raw)

    def sendall(self, data: bytes) -> None:
        with self._wlock:
            with self._lock:
                view = memoryview(data)
                while view:
                    n = self.tls.write(view)
                    view = view[n:]
                out = self._out.read()
            if out:
                self.raw.sendall(out)

    def _flush(self) -> None:
        with self._wlock:
            with self._lock:
                out = self._out.read()
            if out:
                self.raw.sendall(out)

    def _flush_quietly(self) -> None:
        try:
            self._flush()
        except OSError:
            pass

    def shutdown(self, how: int) -> None:
        self.raw.shutdown(how)

    def close(self) -> None:
        self.raw.close()

    def fileno(self) -> int:
        return self.raw.fileno()
