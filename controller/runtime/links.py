"""Live state of the topology's declared inter-switch links. Pure: the clock is passed in.

A declared link is *usable* by lanes when both its ports are up (the switches' own port-status
reports), it is out of its hold-down, and it is not *unverified* (``verify.py``: the probes saw it
cabled as declared). Paths are computed over usable links only (``Topology.unusable_links``).

Flap damping: a link that went down must stay up for a hold-down time before lanes use it again,
and the hold-down doubles with every further drop within ``LinkSettings.forget_s`` of the last one
(up to ``max_hold_down_s``). A port flapped every 100 ms therefore changes the usable set once
when it first drops and once when it has been quiet for the hold-down: two re-routes, not
thousands a second. The first up after the controller starts is not damped (nothing flapped).

A switch's report is believed for its own ports only: the dpid is the authenticated connection's
(switch TLS, issue 9), and a report changes only the link end at (that dpid, that port).

A switch that merely loses its controller connection keeps forwarding (``fail_mode=secure``), so
a disconnect alone does not take its links down; a switch that really fails takes its neighbours'
ports down with it, and their port-status reports do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from os_ken.ofproto import ofproto_v1_3 as ofp

from viplanes.settings import DEFAULTS
from viplanes.topologies.model import Link, Topology

End = tuple[int, int]  # (dpid, port)


@dataclass(frozen=True)
class LinkSettings:
    """Damping and verification knobs (``--link-*`` or VIPLANES_LINK_*; defaults: the settings table)."""

    # a link that went down must stay up this long before lanes use it
    hold_down_s: float = DEFAULTS.number("VIPLANES_LINK_HOLD_DOWN_S")
    max_hold_down_s: float = DEFAULTS.number("VIPLANES_LINK_MAX_HOLD_DOWN_S")  # the doubling stops here
    forget_s: float = 60.0  # a drop this long after the previous one starts the doubling afresh
    # cabling probes on every declared link end this often (0: none)
    probe_s: float = DEFAULTS.number("VIPLANES_LINK_PROBE_S")
    probe_misses: int = 5  # a link armed this many intervals without both directions: not seen


def port_is_up(deleted: bool, state: int, config: int) -> bool:
    """A port carries lanes unless deleted, its link is down, or it is administratively down
    (a port-status report's or a port description's ``state`` and ``config`` flags)."""
    return not deleted and not (state & ofp.OFPPS_LINK_DOWN) and not (config & ofp.OFPPC_PORT_DOWN)


@dataclass(frozen=True)
class LinkView:
    """One link as the operator sees it (``/readyz``, doctor, the console, ``/metrics``)."""

    name: str
    state: str  # up | down | held | unverified
    reason: str  # "" when up
    since: float  # the book's clock when the state began
    drops: int  # drops within the damping window (the hold-down's exponent)
    bypass: bool

    @property
    def usable(self) -> bool:
        return self.state == "up"


@dataclass
class _LinkState:
    link: Link
    ends: tuple[End, End]
    names: tuple[str, str]  # "s2:3" of each end, for reasons
    down_ends: set[End] = field(default_factory=set)
    hold_until: float = 0.0
    drops: int = 0
    last_drop: float | None = None
    since: float = 0.0
    unverified: str = ""  # the verifier's reason; "" = verified or verification off


class LinkBook:
    """Every declared link's live state; each mutator answers whether the usable set changed."""

    def __init__(
        self,
        topology: Topology,
        settings: LinkSettings | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.settings = settings or LinkSettings()
        self.clock = clock or time.monotonic
        now = self.clock()
        self._links: dict[str, _LinkState] = {}
        self._by_end: dict[End, str] = {}
        for link in topology.links:
            a = (topology.switch(link.a.switch).dpid, link.a.port)
            b = (topology.switch(link.b.switch).dpid, link.b.port)
            self._links[link.name] = _LinkState(link, (a, b), (str(link.a), str(link.b)), since=now)
            self._by_end[a] = self._by_end[b] = link.name
        self._unusable = self._compute_unusable(now)

    # ---- events -------------------------------------------------------------------------------
    def port_status(self, dpid: int, port: int, up: bool, flap: bool = True) -> bool:
        """A switch reported its own port up or down; True when the usable set changed.
        ``flap`` False: a port found down when its switch connects (its description), not seen
        to drop: it does not count towards the hold-down, so its first up is not damped."""
        name = self._by_end.get((dpid, port))
        if name is None:
            return False  # not a declared link's port: nothing a lane rides
        st = self._links[name]
        now = self.clock()
        was_down = bool(st.down_ends)
        if up:
            st.down_ends.discard((dpid, port))
            if was_down and not st.down_ends:
                st.hold_until = now + self._hold_for(st.drops)
                st.since = now
        else:
            st.down_ends.add((dpid, port))
            if not was_down and not flap:
                st.since = now
            elif not was_down:
                recent = st.last_drop is not None and now - st.last_drop < self.settings.forget_s
                st.drops = st.drops + 1 if recent else 1
                st.last_drop = now
                st.since = now
        return self._refresh(now)

    def set_unverified(self, name: str, reason: str) -> bool:
        """The verifier's verdict on one link ("" = verified); True when the usable set changed."""
        st = self._links.get(name)
        if st is None or st.unverified == reason:
            return False
        st.unverified = reason
        st.since = self.clock()
        return self._refresh(st.since)

    def tick(self) -> bool:
        """Hold-downs that ended; True when the usable set changed (call by ``next_change``)."""
        return self._refresh(self.clock())

    # ---- answers ------------------------------------------------------------------------------
    def unusable(self) -> frozenset[str]:
        """Names of the links no lane may use now."""
        return self._unusable

    def next_change(self) -> float | None:
        """The clock time at which a hold-down ends (``tick`` then), or None."""
        now = self.clock()
        ends = [st.hold_until for st in self._links.values() if not st.down_ends and st.hold_until > now]
        return min(ends, default=None)

    def views(self) -> list[LinkView]:
        now = self.clock()
        return [self._view(st, now) for st in self._links.values()]

    def name_of(self, dpid: int, port: int) -> str | None:
        return self._by_end.get((dpid, port))

    def ends(self) -> dict[str, tuple[End, End]]:
        """Each link's two ends (dpid, port), for the verifier's probes."""
        return {name: st.ends for name, st in self._links.items()}

    # ---- internals ----------------------------------------------------------------------------
    def _hold_for(self, drops: int) -> float:
        if drops <= 0:
            return 0.0
        return min(self.settings.hold_down_s * 2 ** (drops - 1), self.settings.max_hold_down_s)

    def _view(self, st: _LinkState, now: float) -> LinkView:
        if st.down_ends:
            ends = ", ".join(sorted(f"{st.names[st.ends.index(e)]}" for e in st.down_ends))
            state, reason = "down", f"port {ends} down"
        elif st.unverified:
            state, reason = "unverified", st.unverified
        elif st.hold_until > now:
            state = "held"
            reason = f"flapped ({st.drops} drop(s)): held down {st.hold_until - now:.1f} s more"
        else:
            state, reason = "up", ""
        return LinkView(st.link.name, state, reason, st.since, st.drops, st.link.bypass)

    def _compute_unusable(self, now: float) -> frozenset[str]:
        return frozenset(n for n, st in self._links.items() if not self._view(st, now).usable)

    def _refresh(self, now: float) -> bool:
        unusable = self._compute_unusable(now)
        changed = unusable != self._unusable
        self._unusable = unusable
        return changed
