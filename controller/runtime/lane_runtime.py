"""The controller's state and decisions about live switches, with I/O passed in (Faucet style).

``LaneRuntime`` implements :class:`viplanes.dataplane.base.Dataplane`. It compiles with the pure
compiler, sends through a ``send(dpid, ofmsgs) -> bool`` function and reads the clock through
``clock``; the os-ken app (``app.py``) supplies ``send`` and reports replies. Unit tests give it a
fake ``send`` that plays the switches.

Reconcile and refresh live in the ``resync.Resync`` mixin, the periodic drift count in
``drift.DriftWatch``, readiness in ``readiness.SwitchReadiness``: one class, three rooms.

``EmbeddedController`` (``embedded.py``, importable from here) is the in-process default behind
``viplanes serve``: a LaneRuntime plus the os-ken apps listening on (host, port).

Concurrency: ``activate``/``deactivate`` hold one lock for the whole change; a reconcile reads
and compares without it and applies its plan under it, minus the lanes changed meanwhile, so it
never deletes the flows of a lane activated after it read the desired lanes. Replies arrive on
os-ken's event thread (flow stats on the connection's thread) and only set events.
"""

from __future__ import annotations

import copy
import itertools
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile import proxyarp, reconcile
from viplanes.controller.compile import shared as sharedflows
from viplanes.controller.compile.cookies import EXACT_MASK, lane_cookie, lane_id_from_cookie
from viplanes.controller.compile.desired import DesiredFlows
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.runtime.batch import BatchChanges, Staged
from viplanes.controller.runtime.carried import CarriedLanes
from viplanes.controller.runtime.drift import DriftWatch
from viplanes.controller.runtime.pending import Batch, Tracker
from viplanes.controller.runtime.readiness import SwitchReadiness
from viplanes.controller.runtime.resync import RECONCILES_AT_ONCE, LaneRead, Resync, meter_errors_only
from viplanes.dataplane.base import DesiredLanes
from viplanes.domain.values import ActivationResult, LaneCounters, LaneSpec
from viplanes.topologies.model import Topology

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")
Send = Callable[[int, list[Any]], bool]  # queue ofmsgs to a live switch; False: not connected
# several switches' (dpid, ofmsgs) at once, serialised before any is written; one bool each
SendMany = Callable[[list[tuple[int, list[Any]]]], list[bool]]
# How long an activation waits for the switches of its path to (re)connect before it reports
# "not connected" (a transient reason the lane manager retries). 3 s covers two reconnect
# attempts of an OVS whose controller max_backoff is 1 s (the lab's and the tests' setting) and,
# with the 5 s barrier timeout, stays far below the 30 s of our HTTP client.
SWITCH_WAIT_S = 3.0
WORKER_THREAD = "viplanes-worker"  # reconciles spawned on a switch's connect


def error_reason(err_type: int, code: int) -> str:
    names = {v: k for k, v in vars(ofp).items() if k.startswith("OFPET_") and isinstance(v, int)}
    return f"{names.get(err_type, f'type {err_type}')} code {code}"


class LaneRuntime(SwitchReadiness, Resync, DriftWatch, BatchChanges):
    switch_wait_s: float = SWITCH_WAIT_S
    carries_lane_sets = True  # issue 11: destination sets, port ranges and IPv6 compile
    is_master: bool = True  # False: a standby controller (roles.py) that must not write

    def __init__(
        self,
        topology: Topology | None,
        send: Send | None = None,
        *,
        clock: Callable[[], float] = time.time,
        spawn: Callable[[Callable[[], object]], Any] | None = None,
    ) -> None:
        self.topology = topology
        self.send: Send = send or (lambda dpid, ofmsgs: False)
        self.send_many: SendMany | None = None  # the app's; None: one ``send`` per switch
        self.clock = clock
        self.spawn = spawn or (lambda fn: threading.Thread(target=fn, name=WORKER_THREAD, daemon=True).start())
        self.tracker = Tracker()
        self.source: DesiredLanes | None = None
        self.connected: set[int] = set()
        # lanes the switches should carry right now, indexed by the shared flows they need
        self.lanes = CarriedLanes(topology)
        self.removed: deque[tuple[float, int, int, int]] = deque(maxlen=1000)  # (t, dpid, lane, reason)
        self.reconciled: dict[int, reconcile.Plan] = {}  # last plan per dpid, for tests/metrics
        self._xids = itertools.count(random.randrange(1 << 30, 1 << 31))
        self._change = threading.RLock()  # activate/deactivate, and applying a reconcile plan
        self._compile_lock = threading.Lock()  # desired() and its compiled-lane cache
        self._generation = 0  # bumped by every activate/deactivate
        self._touched: dict[int, int] = {}  # lane id -> generation of its last change
        self._touched_addresses: dict[str, int] = {}  # same for the addresses of shared flows
        self._inflight = 0  # reconciles running; _touched is cleared when none is
        self._flows = DesiredFlows(topology) if topology is not None else None
        self.handshakes: HandshakeGauge | None = None  # the listener's (EmbeddedController)
        self._restarted: dict[int, dict[Any, float]] = {}  # dpid -> flow_key -> MODIFY refresh time
        self._applied = 0  # bumped under the change lock by every change or applied plan
        self._read_lock = threading.Lock()  # one read of the desired lanes at a time
        self._reconcile_slots = threading.BoundedSemaphore(RECONCILES_AT_ONCE)
        self._last_read: LaneRead | None = None  # shared by the reconciles of a round
        self.lane_reads = 0
        self._init_drift()

    # ---- naming and sending ------------------------------------------------------------------
    def switch_name(self, dpid: int) -> str:
        sw = self.topology.switch_by_dpid(dpid) if self.topology else None
        return f"switch {sw.name} (dpid {dpid})" if sw else f"switch dpid {dpid}"

    def _xid(self) -> int:
        return next(self._xids) & 0xFFFFFFFF

    def _send_batch(self, dpid: int, ofmsgs: list[Any]) -> Batch | str:
        """Send ofmsgs + one barrier to a switch; the Batch to wait on, or why it was not sent."""
        staged = self._stage_batch(dpid, ofmsgs)
        return staged if isinstance(staged, str) else self._write_staged([staged])[0]

    def _stage_batch(self, dpid: int, ofmsgs: list[Any]) -> Staged | str:
        """ofmsgs + a barrier with their xids, expected by the tracker (before anything is
        written: a reply may come at once); or why nothing may be sent."""
        if dpid not in self.connected:
            return f"{self.switch_name(dpid)} not connected"
        if not self.is_master:
            return f"{self.switch_name(dpid)} not changed: this controller is not master"
        # a reconcile sends the cached desired FlowMods themselves: one sent before (the same
        # flow deleted behind our back twice, a second ovs-vswitchd restart) already has an xid,
        # and os-ken refuses to set another; send a copy with its own
        ofmsgs = [copy.copy(m) if m.xid is not None else m for m in ofmsgs]
        for msg in ofmsgs:
            msg.xid = None
            msg.set_xid(self._xid())
        barrier = parser.OFPBarrierRequest(None)
        barrier.set_xid(self._xid())
        batch = self.tracker.expect_barrier(dpid, [m.xid for m in ofmsgs], barrier.xid)
        return dpid, [*ofmsgs, barrier], batch

    def _write_staged(self, staged: list[Staged]) -> list[Batch | str]:
        """Write staged batches: through ``send_many`` when several switches are due (all
        serialised, then all written back to back), else one ``send`` each."""
        pairs = [(dpid, msgs) for dpid, msgs, _ in staged]
        if self.send_many is not None and len(pairs) > 1:
            written = self.send_many(pairs)
        else:
            written = [self.send(dpid, msgs) for dpid, msgs in pairs]
        out: list[Batch | str] = []
        for (dpid, _, batch), ok in zip(staged, written):
            if ok:
                out.append(batch)
            else:
                self.tracker.forget(batch)
                out.append(f"{self.switch_name(dpid)} not connected")
        return out

    def _apply(
        self, per_dpid: dict[int, list[Any]], timeout_s: float, tolerate: Callable[[Batch], bool] = lambda b: False
    ) -> str | None:
        """Send to every switch at once, then wait for all barriers. None, or the first failure."""
        return self._send_all(per_dpid, timeout_s, tolerate)()

    def _send_all(
        self, per_dpid: dict[int, list[Any]], timeout_s: float, tolerate: Callable[[Batch], bool] = lambda b: False
    ) -> Callable[[], str | None]:
        """Send to every switch at once; the returned function waits for all barriers and gives
        None or the first failure."""
        deadline = time.monotonic() + timeout_s
        batches: list[Batch] = []
        failure = None
        staged: list[Staged] = []
        for dpid, ofmsgs in per_dpid.items():
            ready = self._stage_batch(dpid, ofmsgs)
            if isinstance(ready, str):
                failure = failure or ready
            else:
                staged.append(ready)
        for sent in self._write_staged(staged):
            if isinstance(sent, str):
                failure = failure or sent
            else:
                batches.append(sent)
        return lambda: self._wait_all(batches, deadline, timeout_s, tolerate, failure)

    def _wait_all(
        self,
        batches: list[Batch],
        deadline: float,
        timeout_s: float,
        tolerate: Callable[[Batch], bool],
        failure: str | None,
    ) -> str | None:
        for batch in batches:
            if not batch.wait(deadline):
                self.tracker.forget(batch)
                failure = failure or (f"{self.switch_name(batch.dpid)} did not confirm within {timeout_s:g} s")
                self.mark_suspect([batch.dpid])  # what it holds now is unknown: drift check
            elif batch.error and not tolerate(batch):
                failure = failure or f"{self.switch_name(batch.dpid)} refused: {batch.error}"
                self.mark_suspect([batch.dpid])
        return failure

    # ---- Dataplane ---------------------------------------------------------------------------
    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        self.source = desired_lanes

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        t0 = time.perf_counter()
        if self.topology is None:
            return ActivationResult(False, "controller has no topology", 0.0)
        self._wait_for_switches(lane, self.switch_wait_s)  # outside the lock: reconciles go on
        with self._change:
            try:
                per_dpid = self._compile_to_send(lane)
            except ValueError as exc:
                return ActivationResult(False, str(exc), time.perf_counter() - t0)
            self.note_changed(per_dpid)  # for the drift probe: only these switches change
            missing = [d for d in per_dpid if d not in self.connected]
            if missing:
                return ActivationResult(
                    False, f"{self.switch_name(missing[0])} not connected", time.perf_counter() - t0
                )
            failure = self._apply(per_dpid, timeout_s)
            if failure is None:
                self.lanes[lane.lane_id] = lane
                return ActivationResult(True, "installed", time.perf_counter() - t0)
            if lane.lane_id not in self.lanes:
                # fail closed: no half-installed lane stays behind. A lane already carried
                # (re-sent after an extension) keeps its flows and their old deadline.
                self._remove(
                    lane.lane_id, list(per_dpid), bool(lane.rate_mbps), timeout_s, self._orphaned_addresses(lane)
                )
            return ActivationResult(False, failure, time.perf_counter() - t0)

    def _remove(
        self,
        lane_id: int,
        dpids: list[int],
        with_meter: bool,
        timeout_s: float,
        addresses: dict[int, set[str]] | None = None,
    ) -> str | None:
        """Delete the lane's flows, and the shared flows of ``addresses`` (dpid -> addresses no
        other live lane uses), in one batch per switch."""
        return self._send_removal(lane_id, dpids, with_meter, timeout_s, addresses)()

    def _send_removal(
        self,
        lane_id: int,
        dpids: list[int],
        with_meter: bool,
        timeout_s: float,
        addresses: dict[int, set[str]] | None = None,
    ) -> Callable[[], str | None]:
        """``_remove`` up to the sending; the returned function waits for the barriers."""
        msgs = compiler.compile_lane_removal(lane_id, [d for d in dpids if d in self.connected], with_meter=with_meter)
        for dpid, extra in sharedflows.compile_shared_removal(addresses or {}).items():
            if dpid in self.connected:
                msgs.setdefault(dpid, []).extend(extra)
        return self._send_all(msgs, timeout_s, tolerate=meter_errors_only)

    def _orphaned_addresses(self, lane: LaneSpec) -> dict[int, set[str]]:
        """dpid -> addresses of ``lane`` whose shared flows no other carried lane needs (O(its
        own flows): the carried lanes keep a count per address)."""
        return self.lanes.orphaned(lane)

    def _touch(self, lane_id: int, lane: LaneSpec | None = None) -> None:
        self._generation += 1
        self._applied += 1
        self._touched[lane_id] = self._generation
        if lane is not None:  # its shared flows' addresses: the source and the lane address
            for address in (lane.src_ip, lane.nat_ip):
                if address:
                    self._touched_addresses[str(address)] = self._generation

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        self.begin_deactivate(lane_id, timeout_s)()

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None]:
        """Send the lane's deletes now and return the function that waits for their barriers;
        the caller (the same thread) must call it exactly once, even on error. Lets a release
        commit its state while the switches work; the change lock is held until it is called."""
        self._change.acquire()
        try:
            self._touch(lane_id, self.lanes.get(lane_id))
            lane = self.lanes.pop(lane_id, None)
            dpids = self._lane_dpids(lane) if lane else sorted(self.connected)
            self.note_changed(dpids)
            wait = self._send_removal(
                lane_id,
                dpids,
                with_meter=bool(lane and lane.rate_mbps),
                timeout_s=timeout_s,
                addresses=self._orphaned_addresses(lane) if lane else None,
            )
        except BaseException:
            self._change.release()
            raise

        def finish() -> None:
            try:
                failure = wait()
            finally:
                self._change.release()
            if failure:
                LOG.warning(
                    "lane %d: removal not confirmed (%s); the next drift check reconciles its switches",
                    lane_id,
                    failure,
                )

        return finish

    def _lane_dpids(self, lane: LaneSpec) -> list[int]:
        try:
            return list(compiler.lane_dpids(lane, self.topology))  # type: ignore[arg-type]
        except ValueError:
            return sorted(self.connected)

    def counters(self, lane_id: int, timeout_s: float = 2.0) -> LaneCounters | None:
        lane = self.lanes.get(lane_id)
        if lane is None or self.topology is None:
            return None
        try:
            ingress = compiler.lane_ingress_ports(lane, self.topology)
        except ValueError:
            return None
        by_dpid: dict[int, set[int]] = {}
        for dpid, port in ingress:
            by_dpid.setdefault(dpid, set()).add(port)
        packets = octets = 0
        for dpid, ports in by_dpid.items():
            stats = self.flow_stats(dpid, lane_cookie(lane_id), EXACT_MASK, timeout_s)
            if stats is None:
                return None
            for entry in stats:  # table 1 (conntrack replies) sees the reverse packets again
                if entry.table_id == 0 and entry.match.get("in_port") in ports:
                    packets += entry.packet_count
                    octets += entry.byte_count
        return LaneCounters(packets=packets, bytes=octets)

    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> list[Any] | None:
        """The switch's flows in a cookie range, or None (not connected, error, timeout)."""
        req = parser.OFPFlowStatsRequest(
            None, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, cookie, cookie_mask, parser.OFPMatch()
        )
        req.set_xid(self._xid())
        waiting = self.tracker.expect_stats(dpid, req.xid)
        if dpid not in self.connected or not self.send(dpid, [req]):
            self.tracker.forget(waiting)
            return None
        if not waiting.done.wait(timeout_s):
            self.tracker.forget(waiting)
            return None
        return None if waiting.error else waiting.body

    # ---- events reported by the app ----------------------------------------------------------
    def switch_up(self, dpid: int) -> None:
        self.connected.add(dpid)
        self.spawn(lambda: self.reconcile_switch(dpid))

    def switch_down(self, dpid: int) -> None:
        self.connected.discard(dpid)
        self.reconciled.pop(dpid, None)  # not ready again until its next reconcile
        self.tracker.disconnected(dpid, f"{self.switch_name(dpid)} disconnected")

    def on_barrier_reply(self, dpid: int, xid: int) -> None:
        self.tracker.barrier_reply(dpid, xid)

    def on_error(self, dpid: int, xid: int, err_type: int, code: int) -> None:
        if not self.tracker.error(dpid, xid, err_type, code, error_reason(err_type, code)):
            LOG.warning("%s sent error %s for xid %d", self.switch_name(dpid), error_reason(err_type, code), xid)

    def on_flow_stats(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        self.tracker.stats_reply(dpid, xid, body, more)

    def on_flow_removed(self, dpid: int, cookie: int, reason: int) -> None:
        lane_id = lane_id_from_cookie(cookie)
        if lane_id is None:
            return
        self.removed.append((self.clock(), dpid, lane_id, reason))
        if reason == ofp.OFPRR_HARD_TIMEOUT:
            LOG.info("lane %d: flow on %s reached its hard timeout", lane_id, self.switch_name(dpid))

    def arp_reply(self, frame: bytes) -> bytes | None:
        if self.topology is None:
            return None
        # the distinct lane addresses in use (at most the pool's size), not every lane's
        return proxyarp.lane_pool_arp_reply(self.topology, self.lanes.nat_addresses(), frame)


def __getattr__(name: str) -> Any:
    """``EmbeddedController`` lives in ``embedded`` (it starts os-ken); importable from here."""
    if name == "EmbeddedController":
        from viplanes.controller.openflow.embedded import EmbeddedController

        return EmbeddedController
    raise AttributeError(name)
