"""Watch flows (``controller/compile/watch.py``, run by ``controller/runtime/watching.py``): they
count one exact tuple and change nothing about where any packet goes, are never the app's flows
to reconcile, and are removed whatever happens."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.support.clock import T0 as NOW
from tests.support.flowsim import ip_packet
from tests.support.netsim import Network
from viplanes.controller.compile import watch
from viplanes.controller.compile.base import compile_base
from viplanes.controller.compile.cookies import is_app_cookie, lane_id_from_cookie
from viplanes.controller.compile.lane import compile_lane
from viplanes.controller.runtime.watching import watch_counts
from viplanes.domain.values import FlowWatch, LaneSpec
from viplanes.topologies.model import Topology

CLOUD = "203.0.113.10"
PRE = FlowWatch("s1", 1, "10.1.0.10", CLOUD, "tcp", 40000, 5201)
POST = FlowWatch("s3", 1, "198.51.100.2", CLOUD, "tcp", 51234, 5201)


def upload(topo: Topology) -> dict:
    return ip_packet(topo.host("desktop").iface.mac, topo.middleboxes[0].inside.mac, "10.1.0.10", CLOUD)


def test_a_watch_changes_no_forwarding_and_counts(topo: Topology) -> None:
    net = Network(topo)
    net.install(compile_base(topo))
    before = net.send_from_host("desktop", upload(topo))
    cookie = watch.watch_cookie(1)
    net.install({1: [watch.compile_watch(PRE, cookie)]})
    after = net.send_from_host("desktop", upload(topo))
    assert [(o.kind, o.node, o.packet) for o in after] == [(o.kind, o.node, o.packet) for o in before]
    (entry,) = [f for f in net.table("s1").flows if f.cookie == cookie]
    assert entry.packet_count == 1 and entry.priority == watch.PRIORITY_WATCH == 2  # the sweep is at 1
    assert entry.hard_timeout == watch.WATCH_HARD_TIMEOUT_S
    net.install({1: [watch.compile_watch_delete(cookie)]})
    assert not [f for f in net.table("s1").flows if f.cookie == cookie]


def test_a_lane_and_every_guard_still_win_over_a_watch(topo: Topology) -> None:
    net = Network(topo)
    net.install(compile_base(topo))
    lane = LaneSpec(5, "10.1.0.10", CLOUD, "tcp", 5201, None, "198.51.100.200", NOW + 60)
    net.install(compile_lane(lane, topo, NOW))
    net.install({1: [watch.compile_watch(PRE, watch.watch_cookie(2))]})
    (out,) = net.send_from_host("desktop", upload(topo))
    assert out.kind == "edge"  # the lane took it, not the watch
    assert all(
        f.priority > watch.PRIORITY_WATCH
        for f in net.table("s1").flows
        if f.priority and f.cookie != watch.watch_cookie(2)
    )


def test_the_cookie_is_not_the_apps() -> None:
    """Reconcile and the drift probe count only the app's tag: a watch never looks like drift."""
    cookie = watch.watch_cookie(0xFFFFFFFF)
    assert not is_app_cookie(cookie) and lane_id_from_cookie(cookie) is None
    with pytest.raises(ValueError):
        watch.watch_cookie(1 << 32)


class SimWire:
    """The runtime's wire over the simulated campus; ``traffic`` runs while the watch waits."""

    def __init__(self, net: Network, fail_apply: bool = False) -> None:
        self.net = net
        self.fail_apply = fail_apply
        self.sent: list[Any] = []

    def apply(self, per_dpid: dict[int, list[Any]], timeout_s: float) -> str | None:
        self.sent += [m for msgs in per_dpid.values() for m in msgs]
        if self.fail_apply and any(m.command == 0 for msgs in per_dpid.values() for m in msgs):
            return "s3: not connected"
        self.net.install(per_dpid)
        return None

    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> list[Any] | None:
        return [f.as_stats(0) for f in self.net.tables[dpid].flows if f.cookie & cookie_mask == cookie]


def test_the_runtime_counts_then_removes(topo: Topology) -> None:
    net = Network(topo)
    net.install(compile_base(topo))
    wire = SimWire(net)
    tokens = iter(range(10, 20))

    def traffic(seconds: float) -> None:
        for _ in range(3):
            net.send_from_host("desktop", upload(topo))

    counts = watch_counts(wire, topo, [PRE, POST], 0.3, lambda: next(tokens), sleep=traffic)
    assert counts == [3, 0]  # nothing came from the NAT box with that port
    assert not [f for t in net.tables.values() for f in t.flows if not is_app_cookie(f.cookie)]


def test_a_failed_install_is_removed_and_says_nothing(topo: Topology) -> None:
    net = Network(topo)
    net.install(compile_base(topo))
    wire = SimWire(net, fail_apply=True)
    assert watch_counts(wire, topo, [PRE, POST], 0.3, lambda: 1, sleep=lambda s: None) is None
    assert [m.command for m in wire.sent] == [0, 3]  # the refused add (the border's, first) deleted anyway
    unknown = dataclasses.replace(PRE, switch="s9")
    assert watch_counts(wire, topo, [unknown], 0.3, lambda: 1) is None  # a switch the campus lacks
