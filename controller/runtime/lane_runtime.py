"""The controller's state and decisions about live switches, with I/O passed in (Faucet style).

``LaneRuntime`` implements :class:`viplanes.dataplane.base.Dataplane`. It compiles with the pure
compiler, sends through a ``send(dpid, ofmsgs) -> bool`` function and reads the clock through
``clock``; the os-ken app (``app.py``) supplies ``send`` and reports replies. Unit tests give it a
fake ``send`` that plays the switches.

It is one ``SwitchState`` (``switches.py``: the switches, the carried lanes, the I/O functions
and the locks) shared by its parts, each a plain class given that state: ``wire.Wire`` (send,
barriers, stats), ``batch.Changes`` (the one activation and removal path: one lane is a batch of
one), ``resync.Resync`` (reconcile and refresh), ``drift.DriftWatch`` (the periodic flow count),
``readiness.SwitchReadiness``, ``linkwatch.LinkWatch`` (re-route and cabling probes) and
``replies.SwitchReplies`` (barrier, error, stats, flow-removed and ARP answers). This class
wires them together and answers the app's events.

``EmbeddedController`` (``controller/openflow/embedded.py``) is the in-process default behind
``viplanes serve``: it holds a LaneRuntime and runs the os-ken apps listening on (host, port);
a cluster's ``RoleController`` (``roles.py``) holds one too and answers the switches' events
role-aware. Neither subclasses this class.

Concurrency: a change (activation, removal) holds ``state.change`` from its compile to its last
barrier; a reconcile reads and compares without it and applies its plan under it, minus the
lanes changed meanwhile, so it never deletes the flows of a lane activated after it read the
desired lanes. Replies arrive on os-ken's event thread (flow stats on the connection's thread)
and only set events.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from viplanes.controller.compile import reconcile
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.runtime import ctlimits
from viplanes.controller.runtime.batch import Changes
from viplanes.controller.runtime.carried import CarriedLanes
from viplanes.controller.runtime.drift import DriftWatch, Range
from viplanes.controller.runtime.inspect import ControllerInspector
from viplanes.controller.runtime.lanestats import read_lane_counters
from viplanes.controller.runtime.links import LinkSettings, LinkView
from viplanes.controller.runtime.linkwatch import LinkWatch
from viplanes.controller.runtime.pending import Tracker
from viplanes.controller.runtime.prober import LinkProbes
from viplanes.controller.runtime.readiness import SwitchReadiness
from viplanes.controller.runtime.refusals import RefusalLog
from viplanes.controller.runtime.replies import SwitchReplies
from viplanes.controller.runtime.reroute import Reroute
from viplanes.controller.runtime.resync import Resync
from viplanes.controller.runtime.switches import SWITCH_WAIT_S, Send, SendMany, SwitchState
from viplanes.controller.runtime.switchfacts import FactBook, ask_features, learn_full
from viplanes.controller.runtime.watching import watch_counts
from viplanes.controller.runtime.wire import Tolerate, Wire, error_reason, never
from viplanes.dataplane.base import DesiredLanes, PlaneCapabilities
from viplanes.domain.clock import SteadyClock
from viplanes.domain.inspection import SwitchView
from viplanes.domain.switchfacts import SwitchFacts
from viplanes.domain.values import ActivationResult, FlowWatch, LaneCounters, LaneSpec
from viplanes.topologies.model import Topology

WORKER_THREAD = "viplanes-worker"  # reconciles spawned on a switch's connect
__all__ = ["SWITCH_WAIT_S", "LaneRuntime", "Send", "SendMany", "error_reason"]


class LaneRuntime:
    """The :class:`~viplanes.dataplane.base.Dataplane` of the switches this process reaches, and
    the plain answer to their events (``controller/openflow/events.py:SwitchEvents``)."""

    # ``activate_many``: one barrier per switch for a whole round; ``begin_deactivate`` sends the
    # deletes before the end is committed
    capabilities = PlaneCapabilities(batches=True, removes_early=True)

    def __init__(
        self,
        topology: Topology | None,
        send: Send | None = None,
        *,
        clock: Callable[[], float] | None = None,
        spawn: Callable[[Callable[[], object]], Any] | None = None,
        ask_features: bool = False,
        links: LinkSettings | None = None,
    ) -> None:
        self.state = SwitchState(topology, send or (lambda dpid, ofmsgs: False), clock or SteadyClock())
        self.wire = Wire(self.state)
        self.facts = FactBook()  # what the switches said about themselves (switchfacts)
        # True: ask each switch for its table and meter features when it connects (the embedded
        # controller); False: tests whose fake switches do not answer them
        self.features_on_connect = ask_features
        self.changes = Changes(
            self.state, self.wire, on_table_full=lambda dpids: learn_full(self.state, self.wire, self.facts, dpids)
        )
        self.resync = Resync(self.state, self.wire)
        self.drift = DriftWatch(self.state, self.wire, self.resync.reconcile_switch)
        self.ready = SwitchReadiness(self.state)
        self.refusals = RefusalLog()  # filled by the OpenFlow listener, reported by readiness()
        self.spawn = spawn or (lambda fn: threading.Thread(target=fn, name=WORKER_THREAD, daemon=True).start())
        self.replies = SwitchReplies(self.state)  # barriers, errors, stats, flow-removed, ARP
        self.links = LinkWatch(self.state, self.wire, self.resync, topology, links)  # re-route and probes

    def switch_view(self) -> SwitchView:
        """The console's view of these switches (``inspect.py``)."""
        return ControllerInspector(self, self.openflow_role)

    def bind(self, send: Send, send_many: SendMany | None) -> None:
        """The os-ken app's writers (``app.py``); unit tests set ``send`` to a fake instead."""
        self.state.send, self.state.send_many = send, send_many

    # ---- the members of the Dataplane seam with nothing to do in the runtime itself ----------
    def expect_wake(self, payload: str) -> None:
        return None  # nothing waits for another process's answer

    def openflow_transport(self) -> str | None:
        return None  # no listener of its own: ``EmbeddedController`` answers for its listener

    def start(self) -> None:
        return None  # the listener's (``EmbeddedController.start``)

    def stop(self) -> None:
        self.links.stop()  # the re-route worker; the listener is ``EmbeddedController``'s

    # ---- the shared state, as the app, the lane service and tests name it ----------------------
    @property
    def reroute(self) -> Reroute | None:
        return self.links.reroute

    @reroute.setter
    def reroute(self, reroute: Reroute | None) -> None:
        self.links.reroute = reroute

    @property
    def probes(self) -> LinkProbes | None:
        return self.links.probes

    @property
    def topology(self) -> Topology | None:
        return self.state.topology

    @property
    def connected(self) -> set[int]:
        return self.state.connected

    @property
    def lanes(self) -> CarriedLanes:
        return self.state.lanes

    @property
    def reconciled(self) -> dict[int, reconcile.Plan]:
        return self.state.reconciled

    @property
    def tracker(self) -> Tracker:
        return self.state.tracker

    @property
    def clock(self) -> Callable[[], float]:
        return self.state.clock

    @property
    def send(self) -> Send:
        return self.state.send

    @send.setter
    def send(self, send: Send) -> None:
        self.state.send = send

    @property
    def send_many(self) -> SendMany | None:
        return self.state.send_many

    @send_many.setter
    def send_many(self, send_many: SendMany | None) -> None:
        self.state.send_many = send_many

    @property
    def source(self) -> DesiredLanes | None:
        return self.state.source

    @source.setter
    def source(self, source: DesiredLanes | None) -> None:
        self.state.source = source

    @property
    def handshakes(self) -> HandshakeGauge | None:
        return self.state.handshakes

    @handshakes.setter
    def handshakes(self, gauge: HandshakeGauge | None) -> None:
        self.state.handshakes = gauge

    @property
    def is_master(self) -> bool:
        """False: a standby controller (roles.py), or a master whose lease ran out on its own
        clock (``gate_writes``): it must not write."""
        return self.state.may_write()

    @is_master.setter
    def is_master(self, master: bool) -> None:
        self.state.is_master = master

    def gate_writes(self, lease_valid: Callable[[], bool]) -> None:
        """Writes (and ``is_master``) also need ``lease_valid()``: a cluster node passes its
        lease's deadline check, which reads no database (``viplanes.cluster.leader``)."""
        self.state.write_gate = lease_valid

    @property
    def switch_wait_s(self) -> float:
        return self.state.switch_wait_s

    @switch_wait_s.setter
    def switch_wait_s(self, seconds: float) -> None:
        self.state.switch_wait_s = seconds

    @property
    def lane_reads(self) -> int:
        return self.resync.lane_reads

    @property
    def drift_reconciles(self) -> int:
        return self.drift.drift_reconciles

    def switch_name(self, dpid: int) -> str:
        return self.state.switch_name(dpid)

    def openflow_role(self) -> str:
        """Our OpenFlow role on the switches, for the console: no role request is sent here, so
        every switch treats us as EQUAL (OpenFlow 1.3's default); ``RoleController`` says more."""
        return "equal"

    def _xid(self) -> int:
        return self.state.xid()

    def _apply(self, per_dpid: dict[int, list[Any]], timeout_s: float, tolerate: Tolerate = never) -> str | None:
        """Send to every switch at once, then wait for all barriers. None, or the first failure."""
        return self.wire.apply(per_dpid, timeout_s, tolerate)

    # ---- Dataplane ---------------------------------------------------------------------------
    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        self.state.source = desired_lanes

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        return self.changes.activate(lane, timeout_s)

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        return self.changes.activate_many(lanes, timeout_s)

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        self.changes.begin_deactivate(lane_id, timeout_s)()

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None]:
        return self.changes.begin_deactivate(lane_id, timeout_s)

    def deactivate_many(self, lane_ids: list[int], timeout_s: float = 5.0) -> str | None:
        return self.changes.deactivate_many(lane_ids, timeout_s)

    def queue_removals(self, lane_ids: Iterable[int]) -> None:
        self.changes.queue_removals(lane_ids)

    def counters(self, lane_id: int, timeout_s: float = 2.0) -> LaneCounters | None:
        return read_lane_counters(self, lane_id, timeout_s)

    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> list[Any] | None:
        """The switch's flows in a cookie range, or None (not connected, error, timeout)."""
        return self.wire.flow_stats(dpid, cookie, cookie_mask, timeout_s)

    def watch_counts(self, watches: list[FlowWatch], seconds: float) -> list[int] | None:
        return watch_counts(self.wire, self.topology, watches, seconds, self._xid, change=self.state.change)

    def when_ready(self, wake: Callable[[], None]) -> None:
        self.state.on_ready = wake

    def unready(self, lane: LaneSpec) -> list[str]:
        return self.ready.unready(lane)

    def readiness(self) -> dict[str, Any]:
        """Switches connected and reconciled, and every declared link usable: a link down,
        held down after flapping or unverified makes the controller not ready, by name; the
        recent refusals of switches that tried to connect, when there are some."""
        out = self.ready.readiness()
        self.links.readiness(out)
        refused = self.refusals.recent()
        if refused:  # named only when there are some: a healthy campus's report stays as it was
            out["refused"] = refused
        return out

    # ---- reconcile and drift (``resync.py``, ``drift.py``) -------------------------------------
    def desired(
        self, now: float, dpid: int | None = None, generation: int | None = None
    ) -> tuple[dict[int, list[Any]], dict[int, LaneSpec]]:
        return self.resync.desired(now, dpid, generation)

    def forget_lane_read(self) -> None:
        self.resync.forget_lane_read()

    def warm_up(self) -> None:
        self.resync.warm_up()

    def reconcile_switch(self, dpid: int, timeout_s: float = 10.0) -> reconcile.Plan | None:
        return self.resync.reconcile_switch(dpid, timeout_s)

    def reconcile_all(self) -> None:
        self.resync.reconcile_all()

    def check_drift(self, timeout_s: float = 2.0) -> list[int]:
        return self.drift.check_drift(timeout_s)

    def flow_count(self, dpid: int, timeout_s: float = 2.0) -> int | None:
        return self.drift.flow_count(dpid, timeout_s)

    def expected_flow_counts(self, now: float, dpids: Iterable[int] | None = None) -> dict[int, Range]:
        return self.drift.expected_flow_counts(now, dpids)

    def mark_suspect(self, dpids: Iterable[int]) -> None:
        self.state.mark_suspect(dpids)

    def note_lane_flows(self, lane: LaneSpec, per_dpid: dict[int, list[Any]]) -> None:
        self.state.note_lane_flows(lane, per_dpid)

    # ---- events reported by the app ----------------------------------------------------------
    def switch_facts(self) -> dict[str, SwitchFacts]:
        return self.facts.snapshot()

    def learn_features(self, dpid: int) -> None:
        """On a switch's connect: ask its tables and meters in the background (``ask_features``)."""
        if self.features_on_connect:
            self.spawn(lambda: ask_features(self.state, self.wire, self.facts, dpid))

    def switch_up(self, dpid: int) -> None:
        self.state.connected.add(dpid)
        self.spawn(lambda: self.reconcile_switch(dpid))
        self.links.switch_up(dpid, self.spawn)
        self.learn_features(dpid)
        self.spawn(lambda: ctlimits.apply_zone_limits(self.topology, dpid))  # beside OpenFlow

    def switch_down(self, dpid: int) -> None:
        self.state.connected.discard(dpid)
        self.state.reconciled.pop(dpid, None)  # not ready again until its next reconcile
        self.state.tracker.disconnected(dpid, f"{self.switch_name(dpid)} disconnected")
        self.links.switch_down(dpid)

    def port_status(self, dpid: int, port: int, up: bool) -> None:
        """A switch reported one of its own ports up or down (the app decodes the flags)."""
        self.links.port_status(dpid, port, up)

    def read_ports(self, dpid: int, timeout_s: float = 5.0) -> bool:
        """On a switch's connect: its ports' state (``Reroute.read_ports``)."""
        return self.links.read_ports(dpid, timeout_s)

    def probe_in(self, dpid: int, port: int, frame: bytes) -> bool:
        """A punted frame; True when it was a cabling probe (``prober.py``), valid or not."""
        return self.links.probe_in(dpid, port, frame)

    def link_views(self) -> list[LinkView]:
        """Every declared link's live state, for /readyz, doctor, the console and /metrics."""
        return self.links.views()

    def interrupted(self) -> dict[int, str]:
        """Carried lanes held for want of a usable path, and why (naming the links)."""
        return self.links.interrupted()

    def reroutes(self) -> tuple[int, tuple[float, ...]]:
        return self.links.reroutes()

    # ---- the switches' replies (``replies.py``) ---------------------------------------------
    @property
    def removed(self) -> deque[tuple[float, int, int, int]]:
        return self.replies.removed

    def on_barrier_reply(self, dpid: int, xid: int) -> None:
        self.replies.barrier(dpid, xid)

    def on_error(self, dpid: int, xid: int, err_type: int, code: int) -> None:
        self.replies.error(dpid, xid, err_type, code)

    def on_flow_stats(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        self.replies.flow_stats(dpid, xid, body, more)

    def on_flow_removed(self, dpid: int, cookie: int, reason: int) -> None:
        self.replies.flow_removed(dpid, cookie, reason)

    def arp_reply(self, frame: bytes) -> bytes | None:
        return self.replies.arp_reply(frame)
