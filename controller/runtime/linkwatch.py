"""The runtime's declared links, live: port reports feed the re-route (``reroute.py``), the
cabling probes (``prober.py``) verify that each link is cabled as declared, and both are read back
for /readyz, doctor, the console and /metrics. Without a topology there are no declared links,
and every answer is "none"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from viplanes.controller.runtime.links import LinkBook, LinkSettings, LinkView
from viplanes.controller.runtime.prober import LinkProbes, is_probe
from viplanes.controller.runtime.reroute import Reroute
from viplanes.controller.runtime.resync import Resync
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.wire import Wire
from viplanes.topologies.model import Topology


class LinkWatch:
    """``reroute`` and ``probes``: None without a topology; ``probes`` also None when the probe
    interval is 0. The probes' rounds run only in ``EmbeddedController`` (a thread of its own)."""

    def __init__(
        self, state: SwitchState, wire: Wire, resync: Resync, topology: Topology | None, links: LinkSettings | None
    ) -> None:
        self.reroute: Reroute | None = None
        self.probes: LinkProbes | None = None
        if topology is not None:
            book = LinkBook(topology, links)
            self.reroute = Reroute(state, wire, resync, book, topology)
            if book.settings.probe_s > 0:
                self.probes = LinkProbes(
                    state, topology, self.reroute.set_unverified, book.settings.probe_s, book.settings.probe_misses
                )

    def stop(self) -> None:
        """End the re-route worker (the probes' rounds are ``EmbeddedController``'s thread)."""
        if self.reroute is not None:
            self.reroute.stop()

    def switch_up(self, dpid: int, spawn: Callable[[Callable[[], object]], Any]) -> None:
        """The port list is cabling evidence too: read it when the probes run."""
        if self.probes is not None:
            spawn(lambda: self.read_ports(dpid))

    def switch_down(self, dpid: int) -> None:
        if self.probes is not None:
            self.probes.switch_down(dpid)

    def port_status(self, dpid: int, port: int, up: bool) -> None:
        if self.reroute is not None:
            self.reroute.port_status(dpid, port, up)
        if up and self.probes is not None:
            self.probes.port_up(dpid, port)

    def read_ports(self, dpid: int, timeout_s: float = 5.0) -> bool:
        return self.reroute.read_ports(dpid, timeout_s) if self.reroute is not None else False

    def probe_in(self, dpid: int, port: int, frame: bytes) -> bool:
        if self.probes is None:
            return is_probe(frame)  # punted by the base flows; probes are off: nothing to verify
        return self.probes.packet_in(dpid, port, frame)

    def views(self) -> list[LinkView]:
        return self.reroute.views() if self.reroute is not None else []

    def readiness(self, out: dict[str, Any]) -> None:
        """Every declared link into a readiness report: one not usable makes it not ready."""
        views = self.views()
        if views:
            out["links"] = [{"name": v.name, "state": v.state, "reason": v.reason, "bypass": v.bypass} for v in views]
            if any(not v.usable for v in views):
                out["ready"] = False

    def interrupted(self) -> dict[int, str]:
        return self.reroute.interrupted() if self.reroute is not None else {}

    def reroutes(self) -> tuple[int, tuple[float, ...]]:
        if self.reroute is None:
            return 0, ()
        return self.reroute.reroutes, tuple(self.reroute.durations)
