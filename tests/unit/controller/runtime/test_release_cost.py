"""Cost per live lane (issue 13): activating and releasing one lane must not cost more because
a thousand other lanes are live. The shared per-address flows (``sharedflows``: the ARP reply for
a lane-pool address, ICMP transit for a host) used to be decided by recomputing them from every
carried lane on each release. Counted in Python calls on fake switches (no timing noise)."""

from __future__ import annotations

import dataclasses
import random

from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches
from tests.support.switch_cost import calls_during, lane, reconciled_runtime, synth
from viplanes.controller.compile import shared as sharedflows
from viplanes.controller.compile.cookies import shared_cookie
from viplanes.controller.runtime.lane_runtime import LaneRuntime

ACCESS = 8


def carrying(others: int) -> tuple[LaneRuntime, FakeSwitches, FakeClock]:
    """A runtime on reconciled fake switches that carries ``others`` live lanes of hosts a0..a6
    (set straight into ``runtime.lanes``: what a reconcile or earlier activations leave)."""
    runtime, switches, clock = reconciled_runtime(synth(ACCESS))
    for i in range(others):
        other = lane(1000 + i, i % (ACCESS - 1), clock())
        runtime.lanes[other.lane_id] = other
    return runtime, switches, clock


def cycle_calls(others: int, batch: bool = False) -> int:
    """Calls spent activating and releasing one lane of host a7 next to ``others`` live lanes
    (after a warm-up lane, so caches are equally warm on both sides)."""
    runtime, _, clock = carrying(others)
    warm = lane(1, ACCESS - 1, clock())
    assert runtime.activate(warm).ok
    runtime.deactivate(warm.lane_id)
    probe = lane(2, ACCESS - 1, clock())

    def cycle() -> None:
        if batch:
            assert runtime.activate_many([probe])[probe.lane_id].ok
            assert runtime.deactivate_many([probe.lane_id]) is None
        else:
            assert runtime.activate(probe).ok
            runtime.deactivate(probe.lane_id)

    return calls_during(cycle)


def test_release_work_does_not_grow_with_other_live_lanes():
    few, many = cycle_calls(10), cycle_calls(1000)
    # the old code walked every carried lane's shared flows on each release: ~200x the calls
    assert many <= few * 1.02 + 50, (few, many)


def test_batch_release_work_does_not_grow_with_other_live_lanes():
    few, many = cycle_calls(10, batch=True), cycle_calls(1000, batch=True)
    assert many <= few * 1.02 + 50, (few, many)


def shared_on(switches: FakeSwitches, address: str) -> int:
    """Shared flows of ``address`` on every switch."""
    return sum(
        1
        for table in switches.net.tables.values()
        for entry in table.stats(0, 0, 0)
        if entry.cookie == shared_cookie(address)
    )


def test_shared_flows_go_with_the_last_lane_of_their_address_only():
    runtime, switches, clock = carrying(0)
    first, second = lane(1, 3, clock()), lane(2, 3, clock())  # same host, same lane address
    assert runtime.activate(first).ok and runtime.activate(second).ok
    nat = str(first.nat_ip)
    # the border's ARP reply and its two related-ICMP rules (conntrack zone of the address), once
    assert shared_on(switches, nat) == 3
    runtime.deactivate(first.lane_id)
    assert shared_on(switches, nat) == 3 and shared_on(switches, first.src_ip) > 0
    runtime.deactivate(second.lane_id)
    assert shared_on(switches, nat) == 0 and shared_on(switches, first.src_ip) == 0


def test_the_index_matches_a_rebuild_from_the_carried_lanes_after_any_changes():
    """Whatever path changes ``runtime.lanes`` (activate, release, a batch, a reconcile's
    update/delete, a re-sent lane with another address), the per-address counts equal those
    computed from scratch."""
    runtime, _, clock = carrying(0)
    rng = random.Random(13)
    for step in range(300):
        lane_id = rng.randrange(1, 40)
        action = rng.random()
        spec = lane(lane_id, rng.randrange(ACCESS), clock())
        if rng.random() < 0.3:  # another lane address for the same lane id
            spec = dataclasses.replace(spec, nat_ip=f"198.51.100.{220 + rng.randrange(3)}")
        if action < 0.3:
            runtime.lanes[lane_id] = spec
        elif action < 0.45:
            runtime.lanes.update({lane_id: spec, lane_id + 40: spec})
        elif action < 0.6:
            runtime.lanes.pop(lane_id, None)
        elif action < 0.7 and lane_id in runtime.lanes:
            del runtime.lanes[lane_id]
        elif action < 0.8:
            runtime.lanes.setdefault(lane_id, spec)
        elif action < 0.9:
            assert runtime.activate(spec).ok
        else:
            runtime.deactivate(lane_id)
        specs = dict(runtime.lanes)
        expected: dict[tuple[int, str], int] = {}
        for carried in specs.values():
            for address, per_dpid in sharedflows.lane_addresses(carried, runtime.topology).items():
                for dpid in per_dpid:
                    expected[(dpid, address)] = expected.get((dpid, address), 0) + 1
        assert runtime.lanes.users() == expected, step
        assert sorted(runtime.lanes.nat_addresses()) == sorted(
            {str(ln.nat_ip) for ln in specs.values() if ln.nat_ip}
        ), step
