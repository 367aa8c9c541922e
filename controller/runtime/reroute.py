"""Lanes follow the live links: when the usable set changes, every lane moves to its best path.

The switches' port reports reach ``LinkBook`` (``links.py``, pure, damped). When its usable set
changes, ``Reroute`` swaps the runtime's topology for a *view* of the declared one with the
unusable links left out (``Topology.unusable_links``): every lane compiled from then on takes the
best path over usable links, or is held at its first switch when none is left (``compile/hold``).
Only the lanes whose path changed move, make before break (``moving.py``, ``compile/moves.py``):
their new flows first, then the flows that turn them, then the deletes of the old path, each
round one barrier per switch and all switches at once; nothing is read back from the switches.
A round a switch does not confirm falls back to a full reconcile of every switch.

A TCP connection sees at most the loss between the failure and round 1; its lane-pool address
and its conntrack entry at the border are the same afterwards.

One worker thread does this, so a burst of reports makes one re-route; the os-ken event thread
only records the report and wakes it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.runtime.links import LinkBook, LinkView, port_is_up
from viplanes.controller.runtime.moving import move_lanes
from viplanes.controller.runtime.resync import Resync
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.wire import Wire
from viplanes.topologies.model import Topology

LOG = logging.getLogger("viplanes.controller.runtime.reroute")
REROUTE_THREAD = "viplanes-reroute"
STOP_JOIN_S = 5.0  # a re-route under way waits at most for its switches' barriers


class Reroute:
    """Owns the link book and the runtime's topology view; one worker applies changes."""

    def __init__(
        self,
        state: SwitchState,
        wire: Wire,
        resync: Resync,
        book: LinkBook,
        declared: Topology,
        start: Callable[[Callable[[], None]], Any] | None = None,
    ) -> None:
        self.state = state
        self.wire = wire
        self.resync = resync
        self.book = book
        self.declared = declared
        self._lock = threading.Lock()  # the book: the event thread and the worker share it
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._started = False
        self._worker: threading.Thread | None = None  # the default ``start``'s thread, joined by stop()
        self._start = start or self._thread
        self.reroutes = 0  # usable-set changes applied
        self.durations: deque[float] = deque(maxlen=1000)  # seconds, report to switches confirmed
        self._pending_since: float | None = None
        state.held_reason = self.held_reason  # an activation held from its start says the same

    # ---- events (os-ken's event thread) ----------------------------------------------------------
    def port_status(self, dpid: int, port: int, up: bool, flap: bool = True) -> None:
        with self._lock:
            ours = self.book.name_of(dpid, port) is not None
            self.book.port_status(dpid, port, up, flap)
        if ours:  # even without a change now: a link back up starts a hold-down to wait out
            self._kick()

    def read_ports(self, dpid: int, timeout_s: float = 5.0) -> bool:
        """On a switch's connect: its ports' state (OFPMP_PORT_DESC), so a link that went down
        while the controller was away is known down now. A declared port the switch does not
        list is down. False when the switch did not answer (its port-status reports still count)."""
        body = self.wire.ask(dpid, parser.OFPPortDescStatsRequest(None, 0), timeout_s)
        if not body:  # a switch lists at least its LOCAL port: no list, no news
            LOG.info("%s did not describe its ports (OFPMP_PORT_DESC)", self.state.switch_name(dpid))
            return False
        ports = {int(p.port_no): port_is_up(False, int(p.state), int(p.config)) for p in body}
        for a, b in self.book.ends().values():
            for end_dpid, port in (a, b):
                if end_dpid == dpid:
                    self.port_status(dpid, port, ports.get(port, False), flap=False)
        return True

    def set_unverified(self, name: str, reason: str) -> None:
        with self._lock:
            changed = self.book.set_unverified(name, reason)
        if changed:
            self._kick()

    def views(self) -> list[LinkView]:
        with self._lock:
            return self.book.views()

    def unusable(self) -> frozenset[str]:
        with self._lock:
            return self.book.unusable()

    def interrupted(self) -> dict[int, str]:
        """Carried lanes with no usable path (held at their first switch), and why."""
        flows = self.state.flows
        if flows is None or not self.state.topology or not self.state.topology.unusable_links:
            return {}
        with self.state.compile_lock:
            held = dict(flows.held)
        if not held:
            return {}
        why = self.held_reason()
        return {lane_id: why for lane_id in held}

    def held_reason(self) -> str:
        """Why a lane is held: the links not usable now, each with its state and reason."""
        links = "; ".join(f"{v.name} {v.state} ({v.reason})" for v in self.views() if not v.usable)
        return f"no usable path to the edge: {links}"

    def stop(self, timeout_s: float = STOP_JOIN_S) -> None:
        """End the worker and wait for it: a stopped runtime's worker outlived every test that
        built one (the session's leftover check named it). Final: no report starts it again."""
        self._stop.set()
        self._wake.set()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout_s)
            if worker.is_alive():
                LOG.warning("the re-route worker did not end within %.0f s of stop()", timeout_s)

    # ---- the worker ------------------------------------------------------------------------------
    def _thread(self, fn: Callable[[], None]) -> None:
        self._worker = threading.Thread(target=fn, name=REROUTE_THREAD, daemon=True)
        self._worker.start()

    def _kick(self) -> None:
        if self._pending_since is None:
            self._pending_since = time.monotonic()
        if not self._started and not self._stop.is_set():
            self._started = True
            self._start(self._run)
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                deadline = self.book.next_change()
                now = self.book.clock()
            timeout = None if deadline is None else max(0.0, deadline - now) + 0.01
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.apply_now()
            except Exception:
                LOG.exception("re-route failed; the next link report or the drift round retries")

    def apply_now(self) -> bool:
        """Bring the view (and the switches) to the book's usable set; False when unchanged."""
        with self._lock:
            self.book.tick()
            unusable = self.book.unusable()
        current = self.state.topology
        if current is not None and current.unusable_links == unusable:
            self._pending_since = None
            return False
        started = self._pending_since if self._pending_since is not None else time.monotonic()
        self._pending_since = None
        view = dataclasses.replace(self.declared, unusable_links=unusable)
        LOG.warning("links not usable now: %s; re-routing the lanes", ", ".join(sorted(unusable)) or "none")
        moved = move_lanes(self.state, self.wire, view)
        self.resync.forget_lane_read()
        LOG.warning(
            "re-routed %d lane(s) (%d derived): %d messages to %d switch(es), compiled in %.0f ms, "
            "sent and confirmed in %.0f ms (rounds %s ms); %.0f ms of CPU",
            moved.lanes,
            moved.derived,
            moved.messages,
            len(moved.dpids),
            moved.compile_s * 1000,
            moved.send_s * 1000,
            " / ".join(f"{r * 1000:.0f}" for r in moved.rounds_s),
            moved.cpu_s * 1000,
        )
        if moved.failure:  # what the switches hold is not known: bring each to the view
            LOG.warning("re-route: %s; reconciling every switch", moved.failure)
            for dpid in sorted(self.state.connected):
                self.resync.reconcile_switch(dpid)
        self.reroutes += 1
        self.durations.append(time.monotonic() - started)
        return True
