"""The OpenFlow listener: accepts switch connections, runs their TLS handshake under per-source
and total caps, and hands each to a ``ofserver.GuardedDatapath``; ``close`` drops them all.

Split from ``ofserver`` (one connection) so each stays one room; see there for why os-ken's own
listener is replaced.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from typing import Any

from os_ken.lib import hub

from viplanes.controller.openflow.admission import Admission, ListenerSecurity
from viplanes.controller.openflow.echo import EchoSweeper
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.openflow.peerauth import SourceLimiter
from viplanes.controller.openflow.server import FlowStatsHook, GuardedDatapath
from viplanes.controller.openflow.tls import ContextSource, TLSChannel

LOG = logging.getLogger("viplanes.controller.openflow.server")
MAX_CONNECTIONS = 512
INSECURE_REMINDER_S = 60.0


class OpenFlowServer:
    """Accepts switch connections on (host, port); ``close`` stops accepting and drops them all."""

    def __init__(
        self,
        host: str,
        port: int,
        security: ListenerSecurity | None = None,
        handshakes: HandshakeGauge | None = None,
        flow_stats_hook: FlowStatsHook | None = None,
    ) -> None:
        self.security = security or ListenerSecurity(tls=None)
        self.flow_stats_hook = flow_stats_hook  # flow-stats replies decoded on each connection's thread
        self.echo_sweeper = EchoSweeper()  # one thread for every connection's echo checks
        # connections accepted and not through their TLS handshake yet (reconciles wait for them)
        self.in_handshake = handshakes or HandshakeGauge()
        # fails here (at start) when the certificate files are unusable
        self.contexts = ContextSource(self.security.tls) if self.security.tls else None
        self.admission = Admission(self.security.trust)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
            self.sock.listen(MAX_CONNECTIONS)  # a campus reconnecting at once fits the backlog
        except OSError:
            self.sock.close()
            raise
        self.address = self.sock.getsockname()[:2]
        self.datapaths: set[GuardedDatapath] = set()
        limits = self.security.limits
        self.handshakes = SourceLimiter(limits.pending_per_source, limits.queued_per_source)
        self.tls_failures = 0
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def serve_forever(self) -> None:
        while not self._closed.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            queued_at = time.monotonic()
            with self._lock:
                pending = sum(self.handshakes.pending.values()) + self.handshakes.waiting_count()
                full = len(self.datapaths) + pending >= MAX_CONNECTIONS
                admitted = not full and self.handshakes.admit(addr[0])
                waits = not full and not admitted and self.handshakes.wait(addr[0], (conn, addr, queued_at))
                if waits or admitted:  # counted before another thread can end its handshake
                    self.in_handshake.enter()
            if waits:
                LOG.debug("OpenFlow connection from %s waits for a handshake place", addr)
                continue
            if not admitted:
                LOG.warning(
                    "refusing OpenFlow connection from %s: %s",
                    addr,
                    f"{MAX_CONNECTIONS} connections open"
                    if full
                    else f"{self.handshakes.limit} handshakes from {addr[0]} in progress and "
                    f"{self.handshakes.queue_limit} waiting",
                )
                conn.close()
                continue
            hub.spawn(self._serve_connection, conn, addr, queued_at).name = f"viplanes-of-conn-{addr[0]}"

    def _handshake_done(self, source: str) -> None:
        """Pass the finished handshake's place to the next connection waiting from ``source``."""
        with self._lock:
            nxt = None if self._closed.is_set() else self.handshakes.done(source)
        if nxt is not None:
            hub.spawn(self._serve_connection, *nxt).name = f"viplanes-of-conn-{source}"

    def _secure(self, conn: socket.socket, addr: Any, queued_at: float) -> tuple[Any, bytes | None] | None:
        """The TLS channel and the peer's verified certificate (DER); None: refused."""
        try:
            timeout_s = self.security.limits.tls_handshake_timeout_s
            if time.monotonic() - queued_at > timeout_s:  # waited its whole deadline for a place
                self.tls_failures += 1
                LOG.warning(
                    "refusing OpenFlow connection from %s: waited %.0f s for a handshake place", addr, timeout_s
                )
                conn.close()
                return None
            if self.contexts is None:
                return conn, None
            channel = TLSChannel(conn, self.contexts.get())
            try:
                channel.handshake(timeout_s)
            except (ssl.SSLError, OSError) as exc:
                self.tls_failures += 1
                LOG.warning(
                    "refusing OpenFlow connection from %s: TLS handshake failed: %s",
                    addr,
                    getattr(exc, "reason", None) or exc,
                )
                conn.close()
                return None
            return channel, channel.peer_cert_der()
        finally:
            self._handshake_done(addr[0])
            self.in_handshake.leave()

    def _serve_connection(self, conn: socket.socket, addr: Any, queued_at: float) -> None:
        secured = self._secure(conn, addr, queued_at)
        if secured is None:
            return
        channel, cert_der = secured
        try:
            dp = GuardedDatapath(
                channel,
                addr,
                self.admission,
                self.security.limits,
                cert_der,
                echo_sweeper=self.echo_sweeper,
                flow_stats_hook=self.flow_stats_hook,
            )
        except OSError:
            conn.close()
            return
        with self._lock:
            self.datapaths.add(dp)
        try:
            dp.serve()
        except Exception:
            LOG.exception("OpenFlow connection from %s failed", addr)
        finally:
            with self._lock:
                self.datapaths.discard(dp)
            dp.close()  # -> DEAD_DISPATCHER: apps forget the switch

    def close(self) -> None:
        self._closed.set()
        self.echo_sweeper.stop()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept()
        except OSError:
            pass
        self.sock.close()
        with self._lock:
            datapaths = list(self.datapaths)
            waiting = self.handshakes.drain()
        for dp in datapaths:
            dp.shutdown()
        for conn, _, _ in waiting:
            conn.close()
            self.in_handshake.leave()

    def remind_insecure(self) -> None:
        """Plain TCP: say so every minute, so nobody runs it by accident for long."""
        while not self._closed.wait(INSECURE_REMINDER_S):
            LOG.warning(
                "INSECURE: OpenFlow on %s:%d is plain TCP (--insecure-tcp): any peer "
                "that reaches it can claim a switch's dpid",
                *self.address,
            )
