"""What the runtime's parts share about the live switches, in one object.

``LaneRuntime`` creates one ``SwitchState`` and hands it to each of its parts: the wire
(``wire.Wire``: sending and waiting), lane changes (``batch.Changes``), reconcile (``resync.Resync``),
the drift probe (``drift.DriftWatch``) and readiness (``readiness.SwitchReadiness``). Whatever more
than one part reads or writes lives here and nowhere else; what one part alone needs stays in it.

Locks (each documented where it is declared below):

- ``change`` (RLock): every change of the carried lanes and every write of flows to a switch
  (an activation, a removal, applying a reconcile plan). Held for a whole change, barriers
  included, so changes never interleave on a switch.
- ``compile_lock``: the desired-flows cache (``flows``). Never taken by a thread that then
  waits for ``change``: taken with ``change`` held or alone, in that order only.

``connected`` is changed only on os-ken's event thread (``switch_up``/``switch_down``) and read
anywhere without a lock (set membership is atomic under the GIL; a stale answer is a transient
"not connected" that the lane manager retries).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import reconcile
from viplanes.controller.compile.desired import DesiredFlows
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.runtime.carried import CarriedLanes
from viplanes.controller.runtime.heap import HeapFreezer
from viplanes.controller.runtime.pending import Tracker
from viplanes.dataplane.base import DesiredLanes
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

Send = Callable[[int, list[Any]], bool]  # queue ofmsgs to a live switch; False: not connected
# several switches' (dpid, ofmsgs) at once, serialised before any is written; one bool each
SendMany = Callable[[list[tuple[int, list[Any]]]], list[bool]]
# How long an activation waits for the switches of its path to (re)connect before it reports
# "not connected" (a transient reason the lane manager retries). 3 s covers two reconnect
# attempts of an OVS whose controller max_backoff is 1 s (the lab's and the tests' setting) and,
# with the 5 s barrier timeout, stays far below the 30 s of our HTTP client.
SWITCH_WAIT_S = 3.0


def flow_mod_counts(per_dpid: dict[int, list[Any]]) -> dict[int, int]:
    """dpid -> number of flows these messages add (FlowMod ADDs; meters are not flows)."""
    return {
        dpid: sum(1 for m in msgs if isinstance(m, parser.OFPFlowMod) and m.command == ofp.OFPFC_ADD)
        for dpid, msgs in per_dpid.items()
    }


class SwitchState:
    """The switches, the lanes they carry, the I/O functions and the locks of one runtime."""

    def __init__(self, topology: Topology | None, send: Send, clock: Callable[[], float]) -> None:
        self.topology = topology
        # I/O, set by the os-ken app (``app.py``) or a test
        self.send: Send = send
        self.send_many: SendMany | None = None  # None: one ``send`` per switch
        self.clock = clock
        self.source: DesiredLanes | None = None  # the lane service's desired lanes (reconcile)
        self.handshakes: HandshakeGauge | None = None  # the listener's (EmbeddedController)
        self.is_master = True  # False: a standby controller (roles.py) that must not write
        # the lease's own clock (``LaneRuntime.gate_writes``): False once its deadline passed,
        # whatever the role bit says; None (one controller, no lease) never closes
        self.write_gate: Callable[[], bool] | None = None
        self.switch_wait_s = SWITCH_WAIT_S
        # why a lane is held for want of a usable path, naming the links (``Reroute``); None:
        # no live links (an activation's compile error is the reason)
        self.held_reason: Callable[[], str] | None = None
        # the switches and what they carry
        self.connected: set[int] = set()
        self.lanes = CarriedLanes(topology)  # lanes the switches should carry right now
        self.reconciled: dict[int, reconcile.Plan] = {}  # last plan per dpid: "ready" (readiness)
        self.on_ready: Callable[[], None] | None = None  # a switch became ready (``when_ready``)
        self.tracker = Tracker()  # outstanding barriers and stats requests (its own lock)
        self.flows = DesiredFlows(topology) if topology is not None else None  # compile_lock
        self.heap = HeapFreezer()  # when long-lived compiled state leaves the cyclic GC
        self._xids = itertools.count(random.randrange(1 << 30, 1 << 31))
        # locks (module docstring)
        self.change = threading.RLock()
        self.compile_lock = threading.Lock()
        # under ``change``: what changed since a reconcile read the desired lanes
        self.generation = 0  # bumped by every lane change
        self.touched: dict[int, int] = {}  # lane id -> generation of its last change
        self.touched_addresses: dict[str, int] = {}  # same for the addresses of shared flows
        self.reading_now = 0  # reconciles between reading and applying; touched is kept while > 0
        # under ``change``: the drift probe's epochs (``drift.py``). A round computes the
        # expected counts once, and a probe stays good while only other switches change (issue
        # 13: activations on one path must not make the round recompute for, or drop the answers
        # of, the 100 switches off it)
        self.applied = 0  # bumped by every change or applied plan
        self.changed_at: dict[int, int] = {}  # dpid -> epoch of its latest change
        self.any_changed_at = 0  # epoch of the latest change that may move any switch's count
        self.lane_flow_counts: dict[LaneSpec, dict[int, int]] = {}  # lane -> dpid -> its flows
        # switches a change was not confirmed on: the drift round reconciles them (set.update
        # and set.discard are atomic; no lock)
        self.suspect: set[int] = set()

    def may_write(self) -> bool:
        """Master, and (in a cluster) the lease still ours on its local deadline: every path
        that writes to a switch asks this, so a master cut off from the database stops writing
        at its deadline, not when a switch refuses it (issue 28)."""
        return self.is_master and (self.write_gate is None or self.write_gate())

    def short_name(self, dpid: int) -> str:
        """The switch's name in the topology (``s1``), for reasons in operator words."""
        sw = self.topology.switch_by_dpid(dpid) if self.topology else None
        return sw.name if sw else f"dpid {dpid}"

    def switch_name(self, dpid: int) -> str:
        sw = self.topology.switch_by_dpid(dpid) if self.topology else None
        return f"switch {sw.name} (dpid {dpid})" if sw else f"switch dpid {dpid}"

    def xid(self) -> int:
        return next(self._xids) & 0xFFFFFFFF

    # ---- bookkeeping of changes (call with ``change`` held) --------------------------------
    def touch(self, lane_id: int, lane: LaneSpec | None = None) -> None:
        """A lane changes now: a reconcile that read before leaves it (and its addresses) alone."""
        self.generation += 1
        self.applied += 1
        self.touched[lane_id] = self.generation
        if lane is not None:  # its shared flows' addresses: the source and the lane address
            for address in (lane.src_ip, lane.nat_ip):
                if address:
                    self.touched_addresses[str(address)] = self.generation

    def changed_since(self, generation: int) -> set[int]:
        """Lanes activated or removed after ``generation``."""
        return {lid for lid, gen in self.touched.items() if gen > generation}

    def note_changed(self, dpids: Iterable[int] | None = None) -> None:
        """These switches' flows or expected counts (None: possibly any switch's) changed at
        the current epoch (``applied``): a drift probe in flight compares next time."""
        if dpids is None:
            self.any_changed_at = self.applied
        else:
            for dpid in dpids:
                self.changed_at[dpid] = self.applied

    def note_lane_flows(self, lane: LaneSpec, per_dpid: dict[int, list[Any]]) -> None:
        """Remember how many flows ``lane`` puts on each switch (its compiled messages)."""
        self.lane_flow_counts[lane] = flow_mod_counts(per_dpid)

    def mark_suspect(self, dpids: Iterable[int]) -> None:
        """A change to these switches was not confirmed: reconcile them at the next check."""
        self.suspect.update(dpids)

    @contextlib.contextmanager
    def reading(self) -> Iterator[int]:
        """A read of the desired lanes that may race with changes: yields the generation to
        compare against with ``changed_since``."""
        with self.change:
            generation = self.generation
            self.reading_now += 1
        try:
            yield generation
        finally:
            with self.change:
                self.reading_now -= 1
                if not self.reading_now:
                    self.touched.clear()
                    self.touched_addresses.clear()

    def wait_until_connected(self, dpids: Iterable[int], timeout_s: float) -> None:
        """Give these switches up to ``timeout_s`` to (re)connect (outside any lock)."""
        needed = set(dpids)
        deadline = time.monotonic() + timeout_s
        while not needed <= self.connected and time.monotonic() < deadline:
            time.sleep(0.05)
