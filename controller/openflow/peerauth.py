"""Which TLS peer may speak for which datapath id, and how much it may send. Pure: no sockets.

Why: a certificate signed by the campus CA proves a peer is *some* campus switch, not *which* one.
After the features reply names a dpid, ``authorize`` decides whether this certificate may claim
it (the rules are in its docstring). ``TokenBucket`` bounds what one connection can make the
controller do (PACKET_IN parsing, ARP answers, echo replies).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509

from viplanes.pki import cert_dpids, cert_sha256
from viplanes.topologies.model import Topology


@dataclass(frozen=True)
class Decision:
    ok: bool
    reason: str


@dataclass(frozen=True)
class SwitchTrust:
    """What the controller trusts, fixed at start.

    ``topology``: None means no topology is loaded, so any dpid may connect (lab launcher).
    ``fleet_pins``: certificates allowed for every dpid without a pin of its own (one
    ovs-vswitchd serving every bridge of a single-host site or lab: ``--switch-cert-pin``).
    """

    topology: Topology | None = None
    fleet_pins: frozenset[str] = field(default_factory=frozenset)


def authorize(cert_der: bytes | None, dpid: int, trust: SwitchTrust) -> Decision:
    """May the peer that presented ``cert_der`` (already verified against the campus CA) serve
    ``dpid``?

    1. With a topology, a dpid it does not list is refused.
    2. The switch pins certificates (``cert_sha256`` in the topology): the fingerprint must be one.
    3. Otherwise a fleet pin (``--switch-cert-pin``) or the dpid in the certificate's
       subjectAltName (``urn:viplanes:dpid:<16 hex>``) authorizes it.
    ``cert_der`` None means a plain-TCP listener (``--insecure-tcp``): only rule 1 applies.
    """
    name = f"dpid {dpid} ({dpid:#018x})"
    switch = trust.topology.switch_by_dpid(dpid) if trust.topology is not None else None
    if trust.topology is not None and switch is None:
        return Decision(False, f"{name} is not in topology {trust.topology.name}")
    if cert_der is None:
        return Decision(True, "insecure TCP listener: no certificate checked")
    fingerprint = cert_sha256(cert_der)
    if switch is not None and switch.cert_sha256:
        if fingerprint in switch.cert_sha256:
            return Decision(True, f"certificate pinned for switch {switch.name}")
        return Decision(
            False, f"certificate sha256 {fingerprint[:16]}... is not pinned for switch {switch.name} ({name})"
        )
    if fingerprint in trust.fleet_pins:
        return Decision(True, "certificate pinned for every switch (--switch-cert-pin)")
    try:
        dpids = cert_dpids(x509.load_der_x509_certificate(cert_der))
    except ValueError:
        return Decision(False, "certificate cannot be decoded")
    if dpid in dpids:
        return Decision(True, "certificate names the dpid")
    named = ", ".join(f"{d:#x}" for d in sorted(dpids)) or "none"
    return Decision(
        False, f"certificate sha256 {fingerprint[:16]}... is not authorized for {name} (dpids it names: {named})"
    )


def normalize_pins(pins: Iterable[str]) -> frozenset[str]:
    """Operator-typed fingerprints (hex, maybe with colons) -> lowercase hex; ValueError if bad."""
    out = set()
    for pin in pins:
        text = pin.replace(":", "").strip().lower()
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            raise ValueError(f"{pin!r} is not a SHA-256 fingerprint (64 hex digits)")
        out.add(text)
    return frozenset(out)


class TokenBucket:
    """``rate`` tokens per second up to ``burst``; ``take`` says whether one is left.

    ``excess`` counts refusals in the current window of ``window_s``; ``abusive`` is true when a
    whole window's refusals exceed ``close_after`` (a peer far over the limit for long).
    """

    def __init__(
        self,
        rate: float,
        burst: float,
        *,
        clock: Callable[[], float],
        window_s: float = 10.0,
        close_after: int | None = None,
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = burst
        self.stamp = clock()
        self.dropped = 0  # since the start, for metrics and logs
        self.window_s, self.close_after = window_s, close_after
        self._window_start = self.stamp
        self._window_dropped = 0
        self.abusive = False

    def take(self) -> bool:
        now = self.clock()
        elapsed = now - self.stamp
        if elapsed > 0:
            self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
            self.stamp = now
        if now - self._window_start >= self.window_s:
            self._window_start, self._window_dropped = now, 0
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.dropped += 1
        self._window_dropped += 1
        if self.close_after is not None and self._window_dropped > self.close_after:
            self.abusive = True
        return False


class SourceLimiter:
    """Connections per source address that have not finished their TLS handshake, and the ones
    waiting for a free place (thread-safe when the caller holds its own lock: the listener does).

    Over ``limit`` a connection waits, up to ``queue_limit`` per source, instead of being closed:
    a lab's switches all connect from one address (127.0.0.1), and after a controller restart 140
    of them arrive within a second; closed ones came back only after OVS's reconnect backoff, so a
    restart took 6-10 s (issue 13). Waiting costs a socket, no thread; beyond the queue a
    connection is still closed at once."""

    def __init__(self, limit: int, queue_limit: int = 0) -> None:
        self.limit = limit
        self.queue_limit = queue_limit
        self.pending: dict[str, int] = {}
        self.waiting: dict[str, collections.deque[Any]] = {}

    def admit(self, source: str) -> bool:
        count = self.pending.get(source, 0)
        if count >= self.limit:
            return False
        self.pending[source] = count + 1
        return True

    def wait(self, source: str, item: Any) -> bool:
        """Queue ``item`` for the next free place of ``source``; False: the queue is full."""
        if len(self.waiting.get(source, ())) >= self.queue_limit:
            return False
        self.waiting.setdefault(source, collections.deque()).append(item)
        return True

    def withdraw(self, source: str, match: Callable[[Any], bool]) -> Any | None:
        """Take the first waiting item of ``source`` that ``match``es out of its queue (None: none)."""
        queue = self.waiting.get(source)
        for item in queue or ():
            if match(item):
                queue.remove(item)  # type: ignore[union-attr]
                if not queue:
                    del self.waiting[source]
                return item
        return None

    def waiting_count(self) -> int:
        return sum(len(q) for q in self.waiting.values())

    def done(self, source: str) -> Any | None:
        """A handshake of ``source`` ended: its place goes to the first waiting item (returned,
        already counted as pending) or is freed (None)."""
        queue = self.waiting.get(source)
        if queue:
            item = queue.popleft()
            if not queue:
                del self.waiting[source]
            return item
        count = self.pending.get(source, 0) - 1
        if count > 0:
            self.pending[source] = count
        else:
            self.pending.pop(source, None)
        return None

    def drain(self) -> list[Any]:
        """Every waiting item, removed (the listener closes them)."""
        items = [item for q in self.waiting.values() for item in q]
        self.waiting.clear()
        return items
