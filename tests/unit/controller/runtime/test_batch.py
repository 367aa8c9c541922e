"""Batched hand-off (issue 12): several lanes, one barrier per switch, each lane judged on its own.

Pure (``lane_failures``, ``merge``), the runtime's ``activate_many``/``deactivate_many`` against
fake switches, and the lane manager's ``recover`` recording a whole batch in one transaction."""

from __future__ import annotations

from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.fake_switches import FakeSwitches, inline_runtime, lane_flows, spec
from tests.support.world import make_world
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.controller.runtime.outcome import CONFIRMED, SwitchAnswer, both, lane_failures, merge
from viplanes.dataplane.base import PlaneCapabilities
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.values import ActivationResult, LaneSpec
from viplanes.lanes.activation import OutcomeHooks
from viplanes.store.models import Lane


def name(dpid: int) -> str:
    return f"s{dpid}"


def test_each_lane_is_judged_on_its_own_switches_and_its_own_messages() -> None:
    lanes = {1: [1, 2], 2: [1, 3], 3: [4], 4: [1, 2]}
    answers = {
        1: SwitchAnswer(confirmed=True, refused={101: "OFPET_FLOW_MOD_FAILED code 0"}),
        2: SwitchAnswer(confirmed=True),
        3: SwitchAnswer(confirmed=False),
        4: SwitchAnswer(not_sent="s4 not connected"),
    }
    owner = {101: 1, 102: 4}
    out = lane_failures(lanes, answers, owner, name, 5.0)
    assert out[1] == "s1 refused: OFPET_FLOW_MOD_FAILED code 0"  # its own flow-mod was refused
    assert out[4] is None  # same switches, but the refusal named lane 1's message
    assert out[2] == "s3 did not confirm within 5 s"  # transient: stays installing
    assert out[3] == "s4 not connected"


def test_a_switch_missing_from_the_answers_never_counts_as_confirmed() -> None:
    assert lane_failures({7: [9]}, {}, {}, name, 1.0) == {7: "s9 not connected"}


def test_one_switchs_two_batches_answer_as_the_worse_keeping_every_refusal() -> None:
    """A takeover's second batch to the same switch (``Changes._divert``): a refusal or a silence
    in either batch stays the switch's answer, and each refusal still names its own lane."""
    first = SwitchAnswer(confirmed=True, refused={101: "refused a"})
    assert both(CONFIRMED, first) == first and both(first, CONFIRMED) == first
    then = SwitchAnswer(confirmed=False, refused={202: "refused b"})
    combined = both(first, then)
    assert not combined.confirmed and dict(combined.refused) == {101: "refused a", 202: "refused b"}
    assert both(CONFIRMED, SwitchAnswer(not_sent="s1 went away")).not_sent == "s1 went away"
    out = lane_failures({1: [1], 2: [1]}, {1: combined}, {101: 1, 202: 2}, name, 5.0)
    assert out == {1: "s1 did not confirm within 5 s", 2: "s1 did not confirm within 5 s"}


def test_merge_gives_fresh_xids_and_remembers_whose_message_it_is() -> None:
    used = parser.OFPBarrierRequest(None)
    used.set_xid(5)  # a cached message sent before: must go out as a copy
    fresh = parser.OFPBarrierRequest(None)
    per_dpid, owner = merge(
        {1: {10: [used]}, 2: {10: [fresh], 11: [parser.OFPBarrierRequest(None)]}}, iter(range(100, 200)).__next__
    )
    assert [owner[m.xid] for m in per_dpid[10]] == [1, 2]
    assert [owner[m.xid] for m in per_dpid[11]] == [2]
    xids = [m.xid for msgs in per_dpid.values() for m in msgs]
    assert sorted(xids) == [100, 101, 102] and owner == {100: 1, 101: 2, 102: 2}
    assert used.xid == 5 and per_dpid[10][0] is not used


def three_lanes(now: float) -> list[LaneSpec]:
    return [spec(1, now=now), spec(2, now=now, dst_port=5202), spec(3, now=now, dst_port=5203)]


def barriers_per_switch(switches: FakeSwitches) -> dict[int, int]:
    out: dict[int, int] = {}
    for dpid, msg in switches.sent:
        if isinstance(msg, parser.OFPBarrierRequest):
            out[dpid] = out.get(dpid, 0) + 1
    return out


def test_one_refused_lane_fails_alone_and_one_barrier_per_switch(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    switches.refuse = lambda dpid, msg: (
        dpid == 3
        and isinstance(msg, parser.OFPFlowMod)
        and msg.cookie == lane_cookie(2)
        and msg.command == ofp.OFPFC_ADD
    )
    results = rt.activate_many(three_lanes(clock.now))
    assert results[1].ok and results[3].ok, results
    assert not results[2].ok and "switch s3 (dpid 3) refused" in results[2].reason
    first_delete = next(
        i for i, (_, m) in enumerate(switches.sent) if isinstance(m, parser.OFPFlowMod) and m.command != ofp.OFPFC_ADD
    )
    batch = FakeSwitches(topo, clock)
    batch.sent = switches.sent[:first_delete]  # the batch itself, before lane 2's clean-up
    assert barriers_per_switch(batch) == {1: 1, 2: 1, 3: 1}
    for dpid in (1, 2, 3):
        assert len(lane_flows(switches, dpid, 1)) == 2 and len(lane_flows(switches, dpid, 3)) == 2
        assert lane_flows(switches, dpid, 2) == []  # fail closed: nothing half-installed
    assert set(rt.lanes) == {1, 3}
    assert rt.tracker.outstanding() == 0


def test_a_switch_that_does_not_confirm_leaves_its_lanes_transient(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    switches.mute.add(3)
    results = rt.activate_many(three_lanes(clock.now), timeout_s=0.2)
    assert all(not r.ok and "did not confirm" in r.reason for r in results.values()), results
    assert rt.lanes == {}


def test_a_lane_on_a_disconnected_switch_sends_nothing(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    rt.switch_wait_s = 0.0
    rt.connected.discard(2)
    results = rt.activate_many([spec(1, now=clock.now)])
    assert results[1].reason == "switch s2 (dpid 2) not connected"
    assert switches.sent == []


def test_deactivate_many_removes_the_batch_and_keeps_the_others(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    assert all(r.ok for r in rt.activate_many(three_lanes(clock.now)).values())
    switches.sent.clear()
    assert rt.deactivate_many([1, 3]) is None
    assert barriers_per_switch(switches) == {1: 1, 2: 1, 3: 1}
    for dpid in (1, 2, 3):
        assert lane_flows(switches, dpid, 1) == [] and lane_flows(switches, dpid, 3) == []
        assert len(lane_flows(switches, dpid, 2)) == 2
    assert set(rt.lanes) == {2}


class BatchPlane(MemoryDataplane):
    """A data plane with ``activate_many``: requests leave lanes installing (busy); a batch then
    answers from ``outcomes`` (lane id -> reason, None = installed)."""

    capabilities = PlaneCapabilities(batches=True)

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[int, str | None] = {}
        self.batches: list[list[int]] = []

    def attach_source(self, source: Any) -> None: ...
    def unready(self, lane: LaneSpec) -> list[str]:
        return []

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        return ActivationResult(False, "data plane busy: the test's controller is away", 0.0)

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        self.batches.append([ln.lane_id for ln in lanes])
        return {
            ln.lane_id: ActivationResult(
                self.outcomes.get(ln.lane_id) is None, self.outcomes.get(ln.lane_id) or "installed", 0.001
            )
            for ln in lanes
        }

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None: ...


def test_recover_records_a_whole_batch_in_one_transaction(sqlite_url, clock, topo) -> None:
    plane = BatchPlane()
    world = make_world(sqlite_url, clock, plane, topo)  # type: ignore[arg-type]
    try:
        ids = []
        for port in (9001, 9002, 9003):
            r = world.lane(dst_port=port)
            assert r.status_code in (201, 202) and r.json["state"] == "installing", r.json
            ids.append(r.json["id"])
        manager = world.app.extensions["viplanes"].manager
        committed: list[dict[int, str]] = []
        manager.announce_outcomes(OutcomeHooks(committed=lambda s, states, at: committed.append(dict(states))))
        plane.outcomes = {
            ids[1]: "switch s3 (dpid 3) refused: OFPET_FLOW_MOD_FAILED code 0",
            ids[2]: "switch s2 (dpid 2) did not confirm within 5 s",
        }
        assert manager.recover() == 3
        assert plane.batches == [ids]  # one batch for every waiting lane
        db = world.app.extensions["viplanes"].db
        with db.read() as s:
            states = {ln.id: (ln.state, ln.reason) for ln in s.query(Lane).filter(Lane.id.in_(ids))}
        assert states[ids[0]][0] == "active"
        assert states[ids[1]][0] == "failed" and "refused" in states[ids[1]][1]
        assert states[ids[2]][0] == "installing" and "did not confirm" in states[ids[2]][1]
        assert committed == [{ids[0]: "active", ids[1]: "failed", ids[2]: "installing"}]
        plane.outcomes = {}
        assert manager.recover() == 1 and plane.batches[-1] == [ids[2]]  # the next round: only it
        with db.read() as s:
            assert s.get(Lane, ids[2]).state == "active"
    finally:
        world.app.extensions["viplanes"].db.dispose()


def test_removals_ride_with_activations_and_keep_shared_flows_a_new_lane_needs(topo, clock, switches) -> None:
    rt = inline_runtime(topo, clock, switches)
    assert rt.activate_many([spec(1, now=clock.now)])[1].ok
    lane_cookies = {lane_cookie(1), lane_cookie(4)}

    def shared() -> dict[int, int]:
        return {d: sum(1 for e in switches.net.tables[d].flows if e.cookie not in lane_cookies) for d in (1, 2, 3)}

    before = shared()
    switches.sent.clear()
    rt.queue_removals([1])
    results = rt.activate_many([spec(4, now=clock.now, dst_port=5204)])  # same source, same NAT address
    assert results[4].ok
    assert barriers_per_switch(switches) == {1: 1, 2: 1, 3: 1}  # removal and activation: one barrier
    for dpid in (1, 2, 3):
        assert lane_flows(switches, dpid, 1) == [] and len(lane_flows(switches, dpid, 4)) == 2
    assert shared() == before  # the address flows lane 4 shares with lane 1 stayed...
    deletes = [
        m
        for _, m in switches.sent
        if isinstance(m, parser.OFPFlowMod) and m.command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT)
    ]
    assert deletes and all(m.cookie == lane_cookie(1) for m in deletes)  # ...never deleted and re-added
    assert set(rt.lanes) == {4}
    assert rt.deactivate_many([]) is None and switches.sent_types().count("OFPBarrierRequest") == 3
