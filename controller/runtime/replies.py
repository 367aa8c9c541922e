"""What the switches send back on os-ken's event thread, apart from their connects and port
reports: barrier replies, errors and flow stats end the waits of ``pending.Tracker``; each
flow-removed message is kept (the last 1000) and a lane's hard timeout logged; a punted ARP
request for a lane-pool address gets the border switch's answer."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp

from viplanes.controller.compile import proxyarp
from viplanes.controller.compile.cookies import lane_id_from_cookie
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.wire import error_reason

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")  # the runtime's log, as before


class SwitchReplies:
    """The runtime's answers to its switches' replies (``LaneRuntime.on_*`` and ``arp_reply``)."""

    def __init__(self, state: SwitchState) -> None:
        self.state = state
        self.removed: deque[tuple[float, int, int, int]] = deque(maxlen=1000)  # (t, dpid, lane, reason)

    def barrier(self, dpid: int, xid: int) -> None:
        self.state.tracker.barrier_reply(dpid, xid)

    def error(self, dpid: int, xid: int, err_type: int, code: int) -> None:
        reason = error_reason(err_type, code, self.state.short_name(dpid))
        if not self.state.tracker.error(dpid, xid, err_type, code, reason):
            LOG.warning("%s sent error %s for xid %d", self.state.switch_name(dpid), reason, xid)

    def flow_stats(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        self.state.tracker.stats_reply(dpid, xid, body, more)

    def flow_removed(self, dpid: int, cookie: int, reason: int) -> None:
        lane_id = lane_id_from_cookie(cookie)
        if lane_id is None:
            return
        self.removed.append((self.state.clock(), dpid, lane_id, reason))
        if reason == ofp.OFPRR_HARD_TIMEOUT:
            LOG.info("lane %d: flow on %s reached its hard timeout", lane_id, self.state.switch_name(dpid))

    def arp_reply(self, frame: bytes) -> bytes | None:
        topology = self.state.topology
        if topology is None:
            return None
        # the distinct lane addresses in use (at most the pool's size), not every lane's
        return proxyarp.lane_pool_arp_reply(topology, self.state.lanes.nat_addresses(), frame)
