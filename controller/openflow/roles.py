"""OpenFlow 1.3 roles for several controllers on one set of switches (issue 12).

Every controller process connects to every switch. The one holding the lease
(``viplanes.cluster.leader``) sends ``OFPRoleRequest(MASTER, generation_id=epoch)`` to each switch, and to
each switch that connects later; the others send SLAVE. The switch keeps the highest generation it
saw and refuses an older one (OFPRRFC_STALE), and refuses flow-mods from a SLAVE (OFPBRC_IS_SLAVE):
so a deposed master that still thinks it leads (a paused process, a partition) cannot change a
switch, whatever it believes. Either error makes this controller step down at once.

Only the master sends flow-mods, reconciles and probes drift. A new master reconciles every switch
by cookie without wiping (``reconcile_switch``), against the lanes the database holds when it takes
over (never a read from before: the old master's lanes), so a failover deletes or re-adds no lane flow.
The lease is the entry point's; this class only hears ``set_role(master, epoch)``.

``RoleController`` holds the node's ``LaneRuntime`` and is the ``SwitchEvents`` the os-ken glue
and the embedded controller's periodic rounds call (``events.py``): the events it answers
role-aware (a switch's connect, an error that deposes us, the refresh and drift rounds) are its
own, the rest it passes to the runtime. The node's ``EmbeddedController`` holds the same runtime.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.runtime import ctlimits
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.controller.runtime.lanestats import read_all_lane_counters
from viplanes.controller.runtime.switches import Send, SendMany
from viplanes.domain.values import LaneCounters

LOG = logging.getLogger("viplanes.controller.openflow.roles")
ROLE_WAIT_S = 2.0


def role_request(master: bool, generation_id: int) -> Any:
    """The role request as data (datapath=None); the generation is the lease epoch."""
    role = ofp.OFPCR_ROLE_MASTER if master else ofp.OFPCR_ROLE_SLAVE
    return parser.OFPRoleRequest(None, role, generation_id & 0xFFFFFFFFFFFFFFFF)


def deposes(err_type: int, code: int) -> bool:
    """The switch says another controller leads: a stale generation, or a write as SLAVE."""
    return (err_type == ofp.OFPET_ROLE_REQUEST_FAILED and code == ofp.OFPRRFC_STALE) or (
        err_type == ofp.OFPET_BAD_REQUEST and code == ofp.OFPBRC_IS_SLAVE
    )


class RoleController:
    """The switches' events of a cluster's node: it lets its runtime write only while master."""

    def __init__(self, runtime: LaneRuntime, on_deposed: Callable[[int], None] | None = None) -> None:
        self.runtime = runtime
        runtime.is_master = False  # the wire (``Wire.stage``) refuses flow-mods while False
        self.epoch = 0
        self.on_deposed = on_deposed
        self._role_lock = threading.Lock()

    @property
    def is_master(self) -> bool:
        """MASTER on the switches and, on a node, the lease still valid (``gate_writes``)."""
        return self.runtime.is_master

    @is_master.setter
    def is_master(self, master: bool) -> None:
        self.runtime.is_master = master

    def readiness(self) -> dict[str, Any]:
        return self.runtime.readiness()

    def all_lane_counters(self) -> dict[int, LaneCounters]:
        """Every carried lane's counters, for the cluster's status reporter (``cluster/reports.py``)."""
        return read_all_lane_counters(self.runtime)

    def openflow_role(self) -> str:
        """MASTER while the lease is ours and no switch deposed us, else SLAVE (``set_role``)."""
        return "master" if self.is_master else "slave"

    # ---- the lease says ---------------------------------------------------------------------
    def set_role(self, master: bool, epoch: int) -> None:
        """MASTER: claim every switch with ``epoch``, then reconcile them; SLAVE: stop writing."""
        t0 = time.perf_counter()
        with self._role_lock:
            self.epoch = epoch
            if not master:
                self.is_master = False
            errors = self._send_roles(sorted(self.runtime.connected), master, epoch)
            refused = [dpid for dpid, err in errors.items() if err and "STALE" in err]
            if master and refused:
                name = self.runtime.switch_name(refused[0])
                LOG.warning("epoch %d is stale on %s: another controller leads", epoch, name)
                self._step_down()
                return
            if master:
                self.is_master = True
        LOG.info(
            "role %s (generation %d) on %d switches in %.0f ms",
            "MASTER" if master else "SLAVE",
            epoch,
            len(errors),
            (time.perf_counter() - t0) * 1000,
        )
        if master:
            # the old master changed lanes in another process, which never moved this runtime's
            # generation: a read from before the takeover (the standby's start) would delete them
            self.runtime.forget_lane_read()
            for dpid in sorted(self.runtime.connected):
                self.runtime.spawn(functools.partial(self.runtime.reconcile_switch, dpid))

    def _send_role(self, dpid: int, master: bool, epoch: int) -> str | None:
        """Send one role request + barrier and wait: None, or the switch's refusal."""
        return self._send_roles([dpid], master, epoch)[dpid]

    def _send_roles(self, dpids: list[int], master: bool, epoch: int) -> dict[int, str | None]:
        """Send the role request + barrier to every switch first, then wait for all answers:
        a takeover costs one round trip, not one per switch in turn (the slowest switch's, not
        the sum; a fail-over's tail on a loaded machine). Per switch: None, or its refusal."""
        rt = self.runtime
        sent: dict[int, Any] = {}
        errors: dict[int, str | None] = {}
        for dpid in dpids:
            msg = role_request(master, epoch)
            msg.set_xid(rt.state.xid())
            barrier = parser.OFPBarrierRequest(None)
            barrier.set_xid(rt.state.xid())
            batch = rt.tracker.expect_barrier(dpid, [msg.xid], barrier.xid)
            if rt.send(dpid, [msg, barrier]):
                sent[dpid] = batch
            else:
                rt.tracker.forget(batch)
                errors[dpid] = f"{rt.switch_name(dpid)} not connected"
        deadline = time.monotonic() + ROLE_WAIT_S
        for dpid, batch in sent.items():
            if not batch.wait(deadline):
                rt.tracker.forget(batch)
                errors[dpid] = f"{rt.switch_name(dpid)} did not confirm its role"
            elif batch.errors and any(deposes(t, c) for _, t, c in batch.errors):
                errors[dpid] = "OFPRRFC_STALE"
            else:
                errors[dpid] = batch.error
        return {dpid: errors[dpid] for dpid in dpids}

    def _step_down(self) -> None:
        if self.is_master:
            LOG.warning("deposed: a switch refused generation %d; now SLAVE", self.epoch)
        self.is_master = False
        if self.on_deposed is not None:
            self.on_deposed(self.epoch)

    # ---- the switches' events (``events.py:SwitchEvents``) -------------------------------------
    def switch_up(self, dpid: int) -> None:
        rt = self.runtime
        rt.connected.add(dpid)
        rt.spawn(lambda: self._greet(dpid))
        rt.learn_features(dpid)  # reading, not writing: a standby asks too
        rt.spawn(lambda: ctlimits.apply_zone_limits(rt.topology, dpid))  # beside OpenFlow

    def _greet(self, dpid: int) -> None:
        """A new connection learns our role first; only the master then reconciles it."""
        with self._role_lock:
            master, epoch = self.is_master, self.epoch
            err = self._send_role(dpid, master, epoch)
        if master and err == "OFPRRFC_STALE":
            self._step_down()
        elif master:
            self.runtime.reconcile_switch(dpid)
        else:
            self.runtime.reconciled.pop(dpid, None)

    def on_error(self, dpid: int, xid: int, err_type: int, code: int) -> None:
        if deposes(err_type, code) and self.is_master:
            self._step_down()
        self.runtime.on_error(dpid, xid, err_type, code)

    def check_drift(self, timeout_s: float = 2.0) -> list[int]:
        return self.runtime.check_drift(timeout_s) if self.is_master else []

    def reconcile_all(self) -> None:
        if self.is_master:
            self.runtime.reconcile_all()

    # the events a role does not change: the runtime's own answer
    def bind(self, send: Send, send_many: SendMany | None) -> None:
        self.runtime.bind(send, send_many)

    def switch_down(self, dpid: int) -> None:
        self.runtime.switch_down(dpid)

    def port_status(self, dpid: int, port: int, up: bool) -> None:
        self.runtime.port_status(dpid, port, up)

    def on_barrier_reply(self, dpid: int, xid: int) -> None:
        self.runtime.on_barrier_reply(dpid, xid)

    def on_flow_stats(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        self.runtime.on_flow_stats(dpid, xid, body, more)

    def on_flow_removed(self, dpid: int, cookie: int, reason: int) -> None:
        self.runtime.on_flow_removed(dpid, cookie, reason)

    def probe_in(self, dpid: int, port: int, frame: bytes) -> bool:
        return self.runtime.probe_in(dpid, port, frame)

    def arp_reply(self, frame: bytes) -> bytes | None:
        return self.runtime.arp_reply(frame)
