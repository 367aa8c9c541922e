"""The OpenFlow listener: accepts switch connections, runs their TLS handshake under per-prefix
and total caps on unfinished handshakes (``preadmit``), refuses and drops certificates on the
deny-list (``denylist``), and hands each switch to a ``ofserver.GuardedDatapath`` under the cap on
connected switches; ``close`` drops them all.

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

from viplanes.controller.openflow import tlsdiag
from viplanes.controller.openflow.admission import Admission, ListenerSecurity
from viplanes.controller.openflow.denylist import CHECK_S as DENY_CHECK_S
from viplanes.controller.openflow.denylist import DenyList
from viplanes.controller.openflow.echo import EchoSweeper
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.openflow.peerauth import SourceLimiter
from viplanes.controller.openflow.preadmit import LogBudget, Ticket, Unfinished
from viplanes.controller.openflow.server import FlowStatsHook, GuardedDatapath
from viplanes.controller.openflow.tls import ContextSource, TLSChannel
from viplanes.controller.runtime.refusals import DENIED, TLS, RefusalLog
from viplanes.pki import cert_sha256

LOG = logging.getLogger("viplanes.controller.openflow.server")
BACKLOG = 512
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
        refusals: RefusalLog | None = None,
    ) -> None:
        self.security = security or ListenerSecurity(tls=None)
        self.flow_stats_hook = flow_stats_hook  # flow-stats replies decoded on each connection's thread
        self.echo_sweeper = EchoSweeper()  # one thread for every connection's echo checks
        # connections accepted and not through their TLS handshake yet (reconciles wait for them)
        self.in_handshake = handshakes or HandshakeGauge()
        # fails here (at start) when the certificate files are unusable
        self.contexts = ContextSource(self.security.tls) if self.security.tls else None
        self.admission = Admission(self.security.trust, refusals=refusals)
        self.deny_list = DenyList(self.security.deny_list)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
            self.sock.listen(BACKLOG)  # a campus reconnecting at once fits the backlog
        except OSError:
            self.sock.close()
            raise
        self.address = self.sock.getsockname()[:2]
        self.datapaths: set[GuardedDatapath] = set()
        self._fingerprints: dict[GuardedDatapath, str] = {}  # of each TLS switch (deny-list checks)
        limits = self.security.limits
        self.handshakes = SourceLimiter(limits.pending_per_source, limits.queued_per_source)
        # every connection before the end of its TLS handshake holds a place here (preadmit)
        self.unfinished = Unfinished(limits.unfinished_total, limits.unfinished_per_prefix)
        self._unfinished_socks: dict[int, socket.socket] = {}  # ticket seq -> its connection
        self._refusal_log = LogBudget()
        self.tls_failures = 0
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def serve_forever(self) -> None:
        if self.security.deny_list is not None:
            hub.spawn(self._watch_deny_list).name = "viplanes-of-deny-list"
        while not self._closed.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            self._accepted(conn, addr)

    def _accepted(self, conn: socket.socket, addr: Any) -> None:
        """Give a new connection a place (maybe displacing a flood's), a handshake thread or a
        wait for one; or close it with the reason logged."""
        queued_at = time.monotonic()
        with self._lock:
            entry = self.unfinished.enter(addr[0])
            ticket = entry.ticket
            admitted = waits = False
            if ticket is not None:
                admitted = self.handshakes.admit(addr[0])
                waits = not admitted and self.handshakes.wait(addr[0], (conn, addr, queued_at, ticket))
                if waits or admitted:  # counted before another thread can end its handshake
                    self.in_handshake.enter()
                    self._unfinished_socks[ticket.seq] = conn
                else:
                    self.unfinished.leave(ticket)
            displaced = [self._displace(victim) for victim in entry.evict]
        for victim_conn in displaced:
            if victim_conn is not None:
                victim_conn.close()
                self.in_handshake.leave()
        if waits:
            LOG.debug("OpenFlow connection from %s waits for a handshake place", addr)
            return
        if not admitted:
            self._refused(
                addr,
                entry.reason
                or f"{self.handshakes.limit} handshakes from {addr[0]} in progress and "
                f"{self.handshakes.queue_limit} waiting",
            )
            conn.close()
            return
        hub.spawn(self._serve_connection, conn, addr, queued_at, ticket).name = f"viplanes-of-conn-{addr[0]}"

    def _refused(self, addr: Any, reason: str) -> None:
        """Log a refusal before a certificate was shown, within ``LogBudget`` (a flood's refusals
        are counted, not each logged)."""
        log, suppressed = self._refusal_log.take()
        if log:
            more = f" ({suppressed} more refusals not logged)" if suppressed else ""
            LOG.warning("refusing OpenFlow connection from %s: %s%s", addr, reason, more)

    def _displace(self, victim: Ticket) -> socket.socket | None:
        """(Holding the lock.) End an evicted connection: a waiting one is taken out of its queue
        and returned for the caller to close; a running handshake is shut down (its thread ends
        it)."""
        conn = self._unfinished_socks.pop(victim.seq, None)
        item = self.handshakes.withdraw(victim.source, lambda it: it[3] is victim)
        if item is not None:
            return conn
        if conn is not None:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes its handshake's recv
            except OSError:
                pass
        return None

    def _handshake_done(self, source: str) -> None:
        """Pass the finished handshake's place to the next connection waiting from ``source``."""
        with self._lock:
            nxt = None if self._closed.is_set() else self.handshakes.done(source)
        if nxt is not None:
            hub.spawn(self._serve_connection, *nxt).name = f"viplanes-of-conn-{source}"

    def _secure(
        self, conn: socket.socket, addr: Any, queued_at: float, ticket: Ticket
    ) -> tuple[Any, bytes | None] | None:
        """The TLS channel and the peer's verified certificate (DER); None: refused."""
        try:
            timeout_s = self.security.limits.tls_handshake_timeout_s
            if ticket.evicted:  # displaced while it waited: the newcomer already closed it
                conn.close()
                return None
            if time.monotonic() - queued_at > timeout_s:  # waited its whole deadline for a place
                self.tls_failures += 1
                self._refused(addr, f"waited {timeout_s:.0f} s for a handshake place")
                conn.close()
                return None
            if self.contexts is None:
                return conn, None
            channel = TLSChannel(conn, self.contexts.get())
            try:
                channel.handshake(timeout_s)
            except (ssl.SSLError, OSError) as exc:
                self.tls_failures += 1
                reason = str(getattr(exc, "reason", None) or exc)
                why = tlsdiag.explain(reason)  # the cause and its fix, beside OpenSSL's word
                self.admission.refusals.record(
                    TLS, None, f"TLS handshake failed: {reason}" + (f" ({why})" if why else "")
                )
                self._refused(addr, f"TLS handshake failed: {reason}" + (f" ({why})" if why else ""))
                conn.close()
                return None
            return channel, channel.peer_cert_der()
        finally:
            with self._lock:
                self.unfinished.leave(ticket)
                self._unfinished_socks.pop(ticket.seq, None)
            self._handshake_done(addr[0])
            self.in_handshake.leave()

    def _serve_connection(self, conn: socket.socket, addr: Any, queued_at: float, ticket: Ticket) -> None:
        secured = self._secure(conn, addr, queued_at, ticket)
        if secured is None:
            return
        channel, cert_der = secured
        denied = self.deny_list.denies(cert_der)
        if denied is not None:
            self.admission.count("denied")
            self.admission.refusals.record(DENIED, None, f"certificate sha256 {denied} is on the deny-list")
            LOG.warning(
                "refusing OpenFlow connection from %s: certificate sha256 %s is on the deny-list %s",
                addr,
                denied,
                self.security.deny_list,
            )
            conn.close()
            return
        if cert_der is not None:  # a campus-CA certificate, not denied: this address may come back
            with self._lock:
                self.unfinished.mark_known(addr[0])
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
        max_switches = self.security.limits.max_switches
        with self._lock:
            full = len(self.datapaths) >= max_switches
            if not full:
                self.datapaths.add(dp)
                if cert_der is not None:
                    self._fingerprints[dp] = cert_sha256(cert_der)
        if full:
            LOG.warning("refusing OpenFlow connection from %s: %d switches connected", addr, max_switches)
            conn.close()
            return
        try:
            dp.serve()
        except Exception:
            LOG.exception("OpenFlow connection from %s failed", addr)
        finally:
            with self._lock:
                self.datapaths.discard(dp)
                self._fingerprints.pop(dp, None)
            dp.close()  # -> DEAD_DISPATCHER: apps forget the switch

    def drop_denied(self) -> int:
        """Shut every connected switch whose certificate is on the deny-list; how many."""
        denied = self.deny_list.refresh()
        if not denied:
            return 0
        with self._lock:
            hits = [(dp, fp) for dp, fp in self._fingerprints.items() if fp in denied]
        for dp, fp in hits:
            self.admission.count("denied")
            LOG.warning(
                "dropping OpenFlow connection from %s (dpid=%s): certificate sha256 %s is on the deny-list %s",
                dp.address,
                dp.id,
                fp,
                self.security.deny_list,
            )
            dp.shutdown()
        return len(hits)

    def _watch_deny_list(self) -> None:
        while not self._closed.wait(DENY_CHECK_S):
            try:
                self.drop_denied()
            except Exception:
                LOG.exception("switch deny-list check failed")

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
        for conn, *_ in waiting:
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
