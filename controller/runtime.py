"""The controller's state and decisions about live switches, with I/O passed in (Faucet style).

``LaneRuntime`` implements :class:`viplanes.dataplane.Dataplane`. It compiles with the pure
compiler, sends through a ``send(dpid, ofmsgs) -> bool`` function and reads the clock through
``clock``; the os-ken app (``app.py``) supplies ``send`` and reports replies. Unit tests give it a
fake ``send`` that plays the switches.

``EmbeddedController`` (``embedded.py``, importable from here) is the in-process default behind
``viplanes serve``: a LaneRuntime plus the os-ken apps listening on (host, port).

Concurrency: ``activate``/``deactivate`` hold one lock for the whole change; a reconcile reads
and compares without it and applies its plan under it, minus the lanes changed meanwhile, so it
never deletes the flows of a lane activated after it read the desired lanes. Replies arrive on
os-ken's event thread (flow stats on the connection's thread) and only set events.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import random
import threading
import time
from collections import deque
from typing import Any, Callable, Iterator

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller import compiler, heap, lanediff, proxyarp, reconcile, sharedflows
from viplanes.controller.cookies import ALL_APP_FLOWS, EXACT_MASK, lane_cookie, lane_id_from_cookie
from viplanes.controller.desired import DesiredFlows
from viplanes.controller.pending import Batch, Tracker
from viplanes.controller.readiness import SwitchReadiness
from viplanes.dataplane import DesiredLanes
from viplanes.domain import ActivationResult, LaneCounters, LaneSpec
from viplanes.topologies.model import Topology

LOG = logging.getLogger("viplanes.controller.runtime")
Send = Callable[[int, list[Any]], bool]  # queue ofmsgs to a live switch; False: not connected
# How long an activation waits for the switches of its path to (re)connect before it reports
# "not connected" (a transient reason the lane manager retries). 3 s covers two reconnect
# attempts of an OVS whose controller max_backoff is 1 s (the lab's and the tests' setting) and,
# with the 5 s barrier timeout, stays far below the 30 s of our HTTP client.
SWITCH_WAIT_S = 3.0


def error_reason(err_type: int, code: int) -> str:
    names = {v: k for k, v in vars(ofp).items() if k.startswith("OFPET_") and isinstance(v, int)}
    return f"{names.get(err_type, f'type {err_type}')} code {code}"


class LaneRuntime(SwitchReadiness):
    switch_wait_s: float = SWITCH_WAIT_S
    carries_lane_sets = True  # issue 11: destination sets, port ranges and IPv6 compile

    def __init__(self, topology: Topology | None, send: Send | None = None, *,
                 clock: Callable[[], float] = time.time,
                 spawn: Callable[[Callable[[], None]], Any] | None = None) -> None:
        self.topology = topology
        self.send: Send = send or (lambda dpid, ofmsgs: False)
        self.clock = clock
        self.spawn = spawn or (lambda fn: threading.Thread(target=fn, daemon=True).start())
        self.tracker = Tracker()
        self.source: DesiredLanes | None = None
        self.connected: set[int] = set()
        self.lanes: dict[int, LaneSpec] = {}  # lanes the switches should carry right now
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
        self._restarted: dict[int, dict[Any, float]] = {}  # dpid -> flow_key -> MODIFY refresh time

    # ---- naming and sending ------------------------------------------------------------------
    def switch_name(self, dpid: int) -> str:
        sw = self.topology.switch_by_dpid(dpid) if self.topology else None
        return f"switch {sw.name} (dpid {dpid})" if sw else f"switch dpid {dpid}"

    def _xid(self) -> int:
        return next(self._xids) & 0xFFFFFFFF

    def _send_batch(self, dpid: int, ofmsgs: list[Any]) -> Batch | str:
        """Send ofmsgs + one barrier to a switch; the Batch to wait on, or why it was not sent."""
        if dpid not in self.connected:
            return f"{self.switch_name(dpid)} not connected"
        for msg in ofmsgs:
            msg.set_xid(self._xid())
        barrier = parser.OFPBarrierRequest(None)
        barrier.set_xid(self._xid())
        batch = self.tracker.expect_barrier(dpid, [m.xid for m in ofmsgs], barrier.xid)
        if not self.send(dpid, [*ofmsgs, barrier]):
            self.tracker.forget(batch)
            return f"{self.switch_name(dpid)} not connected"
        return batch

    def _apply(self, per_dpid: dict[int, list[Any]], timeout_s: float,
               tolerate: Callable[[Batch], bool] = lambda b: False) -> str | None:
        """Send to every switch at once, then wait for all barriers. None, or the first failure."""
        deadline = time.monotonic() + timeout_s
        batches: list[Batch] = []
        failure = None
        for dpid, ofmsgs in per_dpid.items():
            sent = self._send_batch(dpid, ofmsgs)
            if isinstance(sent, str):
                failure = failure or sent
            else:
                batches.append(sent)
        for batch in batches:
            if not batch.wait(deadline):
                self.tracker.forget(batch)
                failure = failure or (f"{self.switch_name(batch.dpid)} did not confirm within "
                                      f"{timeout_s:g} s")
            elif batch.error and not tolerate(batch):
                failure = failure or f"{self.switch_name(batch.dpid)} refused: {batch.error}"
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
            self._touch(lane.lane_id, lane)
            meters_exist = lane.lane_id in self.lanes and bool(lane.rate_mbps)
            try:
                per_dpid = compiler.compile_lane(
                    lane, self.topology, self.clock(),
                    meter_command=ofp.OFPMC_MODIFY if meters_exist else ofp.OFPMC_ADD)
            except ValueError as exc:
                return ActivationResult(False, str(exc), time.perf_counter() - t0)
            # the flows of its addresses too (ARP replies...): ADD is idempotent when another
            # live lane already installed them
            for address_flows in sharedflows.lane_addresses(lane, self.topology).values():
                for dpid, msgs in address_flows.items():
                    per_dpid.setdefault(dpid, []).extend(msgs)
            # ---- issue 11 (lanesets): a re-sent lane whose destination set or ports changed
            # drops the flows its new spec no longer has, after the ADDs in the same batch
            carried = self.lanes.get(lane.lane_id)
            if carried is not None and carried != lane:
                stale = lanediff.stale_deletes(carried, per_dpid, self.topology, self.clock())
                for dpid, msgs in stale.items():
                    per_dpid.setdefault(dpid, []).extend(msgs)
            # ---- end issue 11
            missing = [d for d in per_dpid if d not in self.connected]
            if missing:
                return ActivationResult(False, f"{self.switch_name(missing[0])} not connected",
                                        time.perf_counter() - t0)
            failure = self._apply(per_dpid, timeout_s)
            if failure is None:
                self.lanes[lane.lane_id] = lane
                return ActivationResult(True, "installed", time.perf_counter() - t0)
            if lane.lane_id not in self.lanes:
                # fail closed: no half-installed lane stays behind. A lane already carried
                # (re-sent after an extension) keeps its flows and their old deadline.
                self._remove(lane.lane_id, list(per_dpid), bool(lane.rate_mbps), timeout_s,
                             self._orphaned_addresses(lane))
            return ActivationResult(False, failure, time.perf_counter() - t0)

    def _remove(self, lane_id: int, dpids: list[int], with_meter: bool, timeout_s: float,
                addresses: dict[int, set[str]] | None = None) -> str | None:
        """Delete the lane's flows, and the shared flows of ``addresses`` (dpid -> addresses no
        other live lane uses), in one batch per switch."""
        msgs = compiler.compile_lane_removal(lane_id, [d for d in dpids if d in self.connected],
                                             with_meter=with_meter)
        for dpid, extra in sharedflows.compile_shared_removal(addresses or {}).items():
            if dpid in self.connected:
                msgs.setdefault(dpid, []).extend(extra)
        return self._apply(msgs, timeout_s, tolerate=_meter_errors_only)

    def _orphaned_addresses(self, lane: LaneSpec) -> dict[int, set[str]]:
        """dpid -> addresses of ``lane`` whose shared flows no other carried lane needs."""
        if self.topology is None:
            return {}
        others = [ln for lid, ln in self.lanes.items() if lid != lane.lane_id]
        return sharedflows.orphaned(lane, others, self.topology)

    def _touch(self, lane_id: int, lane: LaneSpec | None = None) -> None:
        self._generation += 1
        self._touched[lane_id] = self._generation
        if lane is not None:  # its shared flows' addresses: the source and the lane address
            for address in (lane.src_ip, lane.nat_ip):
                if address:
                    self._touched_addresses[str(address)] = self._generation

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        with self._change:
            self._touch(lane_id, self.lanes.get(lane_id))
            lane = self.lanes.pop(lane_id, None)
            dpids = self._lane_dpids(lane) if lane else sorted(self.connected)
            failure = self._remove(lane_id, dpids, with_meter=bool(lane and lane.rate_mbps),
                                   timeout_s=timeout_s,
                                   addresses=self._orphaned_addresses(lane) if lane else None)
        if failure:
            LOG.warning("lane %d: removal not confirmed (%s); hard_timeout and the next "
                        "reconcile remove it", lane_id, failure)

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

    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int,
                   timeout_s: float = 2.0) -> list[Any] | None:
        """The switch's flows in a cookie range, or None (not connected, error, timeout)."""
        req = parser.OFPFlowStatsRequest(None, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                         cookie, cookie_mask, parser.OFPMatch())
        req.set_xid(self._xid())
        waiting = self.tracker.expect_stats(dpid, req.xid)
        if dpid not in self.connected or not self.send(dpid, [req]):
            self.tracker.forget(waiting)
            return None
        if not waiting.done.wait(timeout_s):
            self.tracker.forget(waiting)
            return None
        return None if waiting.error else waiting.body

    # ---- reconcile and refresh ---------------------------------------------------------------
    def desired(self, now: float, dpid: int | None = None,
                ) -> tuple[dict[int, list[Any]], dict[int, LaneSpec]]:
        """Desired ofmsgs per dpid (all lanes, or those crossing ``dpid``) and the lanes they
        carry. Raises when the source fails: a failed read must never look like "no lanes"
        (that would delete every lane)."""
        lanes = tuple(self.source()) if self.source is not None else tuple(self.lanes.values())
        if self._flows is None:
            return {}, {}
        self._compile(lanes, now, dpid)
        with self._compile_lock:
            return self._flows.build(lanes, now, dpid)  # all compiled: re-time and collect

    def _compile(self, lanes: tuple[LaneSpec, ...], now: float, dpid: int | None,
                 chunk: int = 200) -> None:
        """Compile (and key) what is not compiled yet, a chunk per hold of the compile lock:
        locks are not fair, and a switch that needs nothing new should not wait for thousands
        of lanes compiled for another one."""
        assert self._flows is not None
        flows = self._flows
        with self._compile_lock:
            todo = [ln for ln in lanes if not flows.compiled(ln)
                    and (dpid is None or dpid in flows.dpids_of(ln))]
        for i in range(0, len(todo), chunk):
            with self._compile_lock:
                for lane in todo[i:i + chunk]:
                    for msgs in (flows.lane(lane, now) or {}).values():
                        for msg in msgs:
                            if isinstance(msg, parser.OFPFlowMod):
                                reconcile.cached_key(msg)
            time.sleep(0.001)

    def warm_up(self) -> None:
        """Compile the desired lanes and their flow identities now, while switches are still
        (re)connecting, so their reconciles only read back and compare."""
        if self._flows is None or self.source is None:
            return
        t0 = time.perf_counter()
        try:
            lanes = tuple(self.source())
        except Exception:  # noqa: BLE001 - the reconciles will try again
            LOG.exception("reading the desired lanes failed")
            return
        self._compile(lanes, self.clock(), None)
        LOG.info("compiled %d desired lanes in %.0f ms", len(lanes),
                 (time.perf_counter() - t0) * 1000)
        if len(lanes) >= heap.BULK_LANES:
            heap.freeze_survivors()

    def reconcile_switch(self, dpid: int, timeout_s: float = 10.0) -> reconcile.Plan | None:
        """Diff the switch's app flows against the desired ones and send only the difference.

        Reading and comparing run without the change lock (20,000 flows take a second), so
        activations go on meanwhile; lanes activated or removed since the desired lanes were
        read are left out of the plan (their own change already did the right thing)."""
        t0 = time.perf_counter()
        if self.topology is not None and self.topology.switch_by_dpid(dpid) is None:
            LOG.warning("%s is not in topology %s: nothing installed", self.switch_name(dpid),
                        self.topology.name)
            return None
        with self._reading() as generation:
            plan = self._reconcile(dpid, generation, t0, timeout_s)
        if plan is not None and len(self.lanes) >= heap.BULK_LANES:
            heap.freeze_survivors()  # what a bulk reconcile leaves behind is long-lived
        return plan

    @contextlib.contextmanager
    def _reading(self) -> Iterator[int]:
        """A read of the desired lanes that may race with activations: yields the generation
        to compare against with ``_changed_since``."""
        with self._change:
            generation = self._generation
            self._inflight += 1
        try:
            yield generation
        finally:
            with self._change:
                self._inflight -= 1
                if not self._inflight:
                    self._touched.clear()
                    self._touched_addresses.clear()

    def _changed_since(self, generation: int) -> set[int]:
        """Lanes activated or removed after ``generation`` (call with the change lock held)."""
        return {lid for lid, gen in self._touched.items() if gen > generation}

    def _reconcile(self, dpid: int, generation: int, t0: float,
                   timeout_s: float) -> reconcile.Plan | None:
        lanes: dict[int, LaneSpec] = {}
        desired_at = self.clock()
        if self.topology is None:
            wanted: list[Any] = [reconcile.default_forwarding()]
        else:
            try:
                per_dpid, lanes = self.desired(desired_at, dpid)
            except Exception:  # noqa: BLE001 - keep what the switch has
                LOG.exception("reading the desired lanes failed; %s left as it is",
                              self.switch_name(dpid))
                return None
            wanted = per_dpid.get(dpid, [])
        actual = self.flow_stats(dpid, *ALL_APP_FLOWS, timeout_s=timeout_s)
        if actual is None:
            LOG.warning("%s: no flow stats, reconcile skipped", self.switch_name(dpid))
            return None
        now = self.clock()
        restarted = self._restarted.setdefault(dpid, {})
        plan = reconcile.plan_switch(wanted, actual, now, restarted, desired_at)
        wait = time.perf_counter()
        with self._change:
            wait = time.perf_counter() - wait
            touched = self._changed_since(generation)
            if touched:
                addresses = {a for a, gen in self._touched_addresses.items() if gen > generation}
                plan = reconcile.without_lanes(plan, touched, addresses)
            self.lanes.update({lid: ln for lid, ln in lanes.items() if lid not in touched})
            live = {reconcile.cached_key(m) for m in wanted if hasattr(m, "match")}
            for key in [k for k in restarted if k not in live]:
                del restarted[key]
            for msg in plan.refreshes:
                if msg.command == ofp.OFPFC_MODIFY_STRICT:
                    restarted[reconcile.cached_key(msg)] = now
            if not plan.empty:
                failure = self._apply({dpid: plan.ofmsgs}, timeout_s, tolerate=_meter_errors_only)
                if failure:
                    LOG.warning("reconcile of %s: %s", self.switch_name(dpid), failure)
            self.reconciled[dpid] = plan
        LOG.info("reconciled %s: kept %d, added %d, deleted %d, refreshed %d in %.1f ms "
                 "(%.1f ms of it waiting for other changes)", self.switch_name(dpid),
                 plan.kept, len(plan.adds), len(plan.deletes), len(plan.refreshes),
                 (time.perf_counter() - t0) * 1000, wait * 1000)
        return plan

    def reconcile_all(self) -> None:
        """Every switch, and forget lanes the source no longer wants (the periodic round)."""
        if self.source is not None and self.topology is not None:
            with self._reading() as generation:
                try:
                    live = {ln.lane_id for ln in self.source()}
                except Exception:  # noqa: BLE001
                    LOG.exception("reading the desired lanes failed")
                    return
                with self._change:
                    keep = live | self._changed_since(generation)
                    for lane_id in [lid for lid in self.lanes if lid not in keep]:
                        del self.lanes[lane_id]
        for dpid in sorted(self.connected):
            self.reconcile_switch(dpid)

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
            LOG.warning("%s sent error %s for xid %d", self.switch_name(dpid),
                        error_reason(err_type, code), xid)

    def on_flow_stats(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        self.tracker.stats_reply(dpid, xid, body, more)

    def on_flow_removed(self, dpid: int, cookie: int, reason: int) -> None:
        lane_id = lane_id_from_cookie(cookie)
        if lane_id is None:
            return
        self.removed.append((self.clock(), dpid, lane_id, reason))
        if reason == ofp.OFPRR_HARD_TIMEOUT:
            LOG.info("lane %d: flow on %s reached its hard timeout", lane_id,
                     self.switch_name(dpid))

    def arp_reply(self, frame: bytes) -> bytes | None:
        if self.topology is None:
            return None
        nat_ips = [ln.nat_ip for ln in list(self.lanes.values()) if ln.nat_ip]
        return proxyarp.lane_pool_arp_reply(self.topology, nat_ips, frame)


def _meter_errors_only(batch: Batch) -> bool:
    """Meter adds/deletes that find the meter already there (or gone) are not failures."""
    return all(t == ofp.OFPET_METER_MOD_FAILED for _, t, _ in batch.errors)


def __getattr__(name: str) -> Any:
    """``EmbeddedController`` lives in ``embedded`` (it starts os-ken); importable from here."""
    if name == "EmbeddedController":
        from viplanes.controller.embedded import EmbeddedController
        return EmbeddedController
    raise AttributeError(name)
