"""The cabling probes at work: send them, take them back, tell the link book what they show.

Every ``interval_s`` (``EmbeddedController`` calls ``round``) the master packet-outs one probe
(``probeframe``) on each end of every declared inter-switch link of a connected switch. The
switch at the other end punts it (``compile/linkprobe``: only on declared link ports) and the
app hands it to ``packet_in``; ``verify.CablingVerifier`` judges the sightings and every
changed verdict goes to ``Reroute.set_unverified``, so no lane uses a link that is miscabled or
never seen (docs/dataplane.md, "Link failures"). A standby controller neither sends nor judges:
it gets no packet-ins, and its verdicts would only be about its own silence.

Thread-safe: ``round`` runs on the probe thread, ``packet_in`` on os-ken's event thread, the
port and switch events on either; one lock guards the codec and the verifier, and the link book
is told outside it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from viplanes.controller.compile.linkprobe import ETH_TYPE_PROBE, probe_out
from viplanes.controller.runtime.probeframe import ProbeCodec, Refusal
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.verify import CablingVerifier
from viplanes.topologies.model import Topology

LOG = logging.getLogger("viplanes.controller.runtime.prober")
SetUnverified = Callable[[str, str], None]  # (link name, reason; "" = usable)
LOG_EVERY_S = 10.0  # refusals are logged at most this often per kind: a flood must not flood the log


def is_probe(frame: bytes) -> bool:
    return len(frame) >= 14 and int.from_bytes(frame[12:14], "big") == ETH_TYPE_PROBE


class LinkProbes:
    """Sends the probes of one controller and turns what comes back into link verdicts."""

    def __init__(
        self,
        state: SwitchState,
        topology: Topology,
        set_unverified: SetUnverified,
        interval_s: float,
        misses: int,
        secret: bytes | None = None,
    ) -> None:
        self.state = state
        self.interval_s = interval_s
        grace = interval_s * misses
        links = {
            link.name: (
                (topology.switch(link.a.switch).dpid, link.a.port),
                (topology.switch(link.b.switch).dpid, link.b.port),
            )
            for link in topology.links
        }
        names = {link.name: (str(link.a), str(link.b)) for link in topology.links}
        self.verifier = CablingVerifier(links, names, grace)
        self.codec = ProbeCodec(window_s=grace, secret=secret)
        self.set_unverified = set_unverified
        self._lock = threading.Lock()
        self.sent = 0
        self.accepted = 0
        self.refused: Counter[str] = Counter()
        self._logged: dict[str, float] = {}

    # ---- the probe thread ----------------------------------------------------------------------
    def round(self) -> None:
        """Arm links whose switches are both ready, send one probe per link end, judge."""
        state = self.state
        now = state.clock()
        ready = {d for d in state.connected if d in state.reconciled}
        if not state.may_write():
            with self._lock:
                for name in self.verifier.links():
                    self.verifier.disarm(name)
            return
        per_dpid: dict[int, list[Any]] = {}
        with self._lock:
            for name, (a, b) in self.verifier.links().items():
                both = a[0] in ready and b[0] in ready
                if both and not self.verifier.armed(name):
                    self.verifier.arm(name, now)
                elif not both and self.verifier.armed(name):
                    self.verifier.disarm(name)
            for dpid, port in self.verifier.ends():
                if dpid in state.connected:
                    per_dpid.setdefault(dpid, []).append(probe_out(port, self.codec.build(dpid, port, now)))
        for dpid, ofmsgs in per_dpid.items():
            if state.send(dpid, ofmsgs):
                self.sent += len(ofmsgs)
        self._report(now)

    # ---- os-ken's event thread -----------------------------------------------------------------
    def packet_in(self, dpid: int, port: int, frame: bytes) -> bool:
        """A punted frame from (dpid, port); True when it was a probe (taken here, valid or not)."""
        if not is_probe(frame):
            return False
        now = self.state.clock()
        with self._lock:
            got = self.codec.check(frame, now)
            if isinstance(got, Refusal):
                self.refused[got.code] += 1
                self._log_refusal(dpid, port, got, now)
                return True
            self.accepted += 1
            self.verifier.heard((got.dpid, got.port), (dpid, port), now)
        self._report(now)
        return True

    def port_up(self, dpid: int, port: int) -> None:
        """A link port came up: its cable may be another now; wait for both directions again."""
        with self._lock:
            name = self.verifier.name_of((dpid, port))
            if name is not None and self.verifier.armed(name):
                self.verifier.arm(name, self.state.clock())

    def switch_down(self, dpid: int) -> None:
        with self._lock:
            for name, (a, b) in self.verifier.links().items():
                if dpid in (a[0], b[0]):
                    self.verifier.disarm(name)

    def verdicts(self) -> dict[str, str]:
        with self._lock:
            return self.verifier.verdicts()

    # ---- internals -----------------------------------------------------------------------------
    def _report(self, now: float) -> None:
        with self._lock:
            changed = self.verifier.judge(now)
        for name, reason in sorted(changed.items()):
            if reason:
                LOG.warning("link %s unverified: %s", name, reason)
            else:
                LOG.info("link %s: cabling as declared (or no verdict against it any more)", name)
            self.set_unverified(name, reason)

    def _log_refusal(self, dpid: int, port: int, refusal: Refusal, now: float) -> None:
        if now - self._logged.get(refusal.code, -LOG_EVERY_S) < LOG_EVERY_S:
            return
        self._logged[refusal.code] = now
        LOG.warning(
            "%s port %d punted a probe frame that is refused (%s: %s; %d so far)",
            self.state.switch_name(dpid),
            port,
            refusal.code,
            refusal.reason,
            self.refused[refusal.code],
        )
