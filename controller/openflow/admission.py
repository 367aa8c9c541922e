"""Who holds a datapath id: authorize a connection after its features reply, never let a newcomer
take over a dpid whose live connection still answers.

Why here and not in the app: the decision must come before os-ken (and so the lane runtime) sees
the features reply, so that no flow-mod, barrier or reconcile ever reaches a connection that is
not authorized. ``OpenFlowServer`` calls ``admit`` on the connection's reader thread.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from viplanes.controller.openflow.peerauth import SwitchTrust, authorize
from viplanes.controller.openflow.tls import TLSFiles
from viplanes.controller.runtime.refusals import UNAUTHORIZED, UNKNOWN_DPID, RefusalLog

LOG = logging.getLogger("viplanes.controller.openflow.admission")
PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Limits:
    """What one peer may make the controller do (defaults: generous for a real switch)."""

    packet_in_per_s: float = 50.0
    packet_in_burst: float = 100.0
    packet_in_close_after: int = 5000  # PACKET_INs dropped within 10 s: the peer is closed
    # cabling probes have their own budget (``punts``): one per declared link port and probe
    # interval is what a switch sends; a flood of them is dropped, never closes the connection
    probe_in_per_s: float = 50.0
    probe_in_burst: float = 100.0
    echo_per_s: float = 5.0
    echo_burst: float = 20.0
    pending_per_source: int = 8  # connections per address still in the TLS handshake
    # connections per address waiting for one of those places (each up to the handshake timeout,
    # then the handshake has its own); beyond, closed at once
    queued_per_source: int = 256
    tls_handshake_timeout_s: float = 5.0  # from accept, waiting for a place included
    # connections not through their TLS handshake (running or waiting), per source /24 or /64 and
    # in all: peers without a certificate never take the places of admitted switches (preadmit)
    unfinished_per_prefix: int = 64
    unfinished_total: int = 128
    max_switches: int = 512  # connections through TLS (certificate verified) at once


@dataclass(frozen=True)
class ListenerSecurity:
    """``tls`` None: plain TCP (``--insecure-tcp``), loudly logged."""

    tls: TLSFiles | None
    trust: SwitchTrust = field(default_factory=SwitchTrust)
    limits: Limits = field(default_factory=Limits)
    # the switch-certificate deny-list file (``viplanes pki deny``); None: none
    deny_list: Path | None = None


class Connection(Protocol):
    address: Any

    def peer_cert_der(self) -> bytes | None: ...

    def probe(self, timeout_s: float) -> bool: ...

    def shutdown(self) -> None: ...


class Admission:
    """The authorized connection of every dpid (thread-safe)."""

    def __init__(
        self, trust: SwitchTrust, probe_timeout_s: float = PROBE_TIMEOUT_S, refusals: RefusalLog | None = None
    ) -> None:
        self.trust = trust
        self.refusals = refusals or RefusalLog()  # the runtime's: /readyz and doctor name the cause
        self.probe_timeout_s = probe_timeout_s
        self.live: dict[int, Connection] = {}
        self.refused: dict[str, int] = {}  # reason kind -> count, for tests and metrics
        self._lock = threading.Lock()
        self._dpid_locks: dict[int, threading.Lock] = {}

    def count(self, kind: str) -> None:
        with self._lock:
            self.refused[kind] = self.refused.get(kind, 0) + 1

    def admit(self, conn: Connection, dpid: int) -> bool:
        """True: ``conn`` now holds ``dpid``. False: close it (the reason is logged)."""
        decision = authorize(conn.peer_cert_der(), dpid, self.trust)
        if not decision.ok:
            self.count("unauthorized")
            topology = self.trust.topology
            unknown = topology is not None and topology.switch_by_dpid(dpid) is None
            # an unknown dpid is nearly always a bridge whose datapath id was never set (OVS then
            # derives one from a MAC address): say the fix, not only the refusal
            fix = ""
            if topology is not None and unknown:
                names = ", ".join(f"{sw.name}={sw.dpid:016x}" for sw in topology.switches[:8])
                fix = (
                    "; if it is one of the campus's bridges, set its datapath id to the topology's: "
                    f"ovs-vsctl set bridge BRIDGE other-config:datapath-id=<16 hex digits> ({names}; docs/switches.md)"
                )
            self.refusals.record(UNKNOWN_DPID if unknown else UNAUTHORIZED, dpid, decision.reason)
            LOG.warning(
                "refusing OpenFlow connection from %s claiming dpid %d: %s%s", conn.address, dpid, decision.reason, fix
            )
            return False
        with self._lock:
            dpid_lock = self._dpid_locks.setdefault(dpid, threading.Lock())
        with dpid_lock:  # one claim of a dpid at a time: two newcomers never both win
            with self._lock:
                old = self.live.get(dpid)
            if old is not None and old is not conn:
                if old.probe(self.probe_timeout_s):
                    self.count("takeover")
                    LOG.warning(
                        "refusing OpenFlow connection from %s claiming dpid %d: the "
                        "connection from %s holds it and answers echo",
                        conn.address,
                        dpid,
                        old.address,
                    )
                    return False
                LOG.warning(
                    "dpid %d: connection from %s did not answer echo within %g s; the "
                    "new connection from %s replaces it",
                    dpid,
                    old.address,
                    self.probe_timeout_s,
                    conn.address,
                )
                old.shutdown()
            with self._lock:
                self.live[dpid] = conn
        LOG.info("dpid %d authorized for %s: %s", dpid, conn.address, decision.reason)
        return True

    def release(self, conn: Connection, dpid: int | None) -> None:
        """``conn`` closed: it no longer holds its dpid (unless another already does)."""
        if dpid is None:
            return
        with self._lock:
            if self.live.get(dpid) is conn:
                del self.live[dpid]
