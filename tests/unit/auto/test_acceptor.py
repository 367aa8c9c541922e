"""The acceptor's refusal paths, each an attack or a misuse reproduced: the flow outside every
automatic grant, automation off (per grant and globally), too many at once, a firefly from another
host, a firefly flood from one host, a below-threshold sampled flow, a full queue. And the lane
that does follow: a normal lane of the grant's principal, its trigger on record and in the API."""

from __future__ import annotations

from sqlalchemy import select

from tests.unit.auto.conftest import set_policy, sighting
from viplanes.domain.sighting import SightingKind, SightingState
from viplanes.store.models import AuditEvent, Lane


def _lanes(world):
    with world.app.extensions["viplanes"].db.read() as s:
        return s.scalars(select(Lane).order_by(Lane.id)).all()


def test_a_firefly_from_the_flows_source_makes_a_lane_with_its_trigger(world, acceptor):
    assert set_policy(world).status_code == 200
    acceptor.refresh()
    acceptor.offer(sighting(evidence={"experiment": "7", "activity": "2"}))
    (lane_id,) = acceptor.run_pending()
    assert lane_id is not None and acceptor.counts["lanes"] == 1
    got = world.client.get(f"/api/v1/lanes/{lane_id}", headers=world.h("alice")).get_json()
    assert got["principal"] == "alice" and got["state"] == "active" and got["src_port"] == 40000
    assert got["trigger"] == {
        "kind": "firefly",
        "grant_id": world.grants["alice"],
        "experiment": "7",
        "activity": "2",
        "reporter": "10.1.0.10",
    }
    assert got["duration_s"] == 3600  # the automatic lane's cap, inside the grant's maximum
    assert world.dataplane.active[lane_id].dst_port == 9000  # a normal lane on the data plane


def test_a_flow_outside_every_automatic_grant_is_rejected_in_offer(world, acceptor):
    set_policy(world)
    acceptor.refresh()
    for s in (
        sighting(src="10.2.0.10"),  # source outside the grant
        sighting(dst="198.18.0.1"),  # destination outside
        sighting(dst_port=22),  # port outside
    ):
        acceptor.offer(s)
    assert acceptor.counts["outside_grant"] == 3
    assert acceptor.run_pending() == [] and _lanes(world) == []


def test_a_grant_without_automation_gets_no_automatic_lane(world, acceptor):
    acceptor.refresh()  # alice's grant allows requested lanes only (the default)
    acceptor.offer(sighting())
    assert acceptor.counts["outside_grant"] == 1 and acceptor.run_pending() == []
    # switched on and then off: the index still lists it until its refresh; the worker re-reads
    set_policy(world)
    acceptor.refresh()
    acceptor.offer(sighting())
    set_policy(world, enabled=False)
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["grant_auto_off"] == 1 and _lanes(world) == []


def test_turning_a_grants_automation_off_ends_its_automatic_lanes(world, acceptor):
    set_policy(world)
    acceptor.refresh()
    lane_id = acceptor.handle(sighting())
    out = set_policy(world, enabled=False).get_json()
    assert out["ended_lanes"] == [lane_id] and lane_id not in world.dataplane.active


def test_the_global_switch_stops_new_lanes_and_ends_live_ones_at_once(world, acceptor):
    set_policy(world, max_auto_lanes=3)
    acceptor.refresh()
    first = acceptor.handle(sighting())
    off = world.client.put("/api/v1/automation", json={"enabled": False}, headers=world.h("root")).get_json()
    assert off == {"enabled": False, "live_auto_lanes": 0, "ended_lanes": [first]}
    assert acceptor.handle(sighting(src_port=40001)) is None
    assert acceptor.counts["automation_off"] == 1 and world.dataplane.active == {}
    with world.app.extensions["viplanes"].db.read() as s:
        assert s.scalar(select(Lane.state).where(Lane.id == first)) == "revoked"
        assert s.scalar(select(AuditEvent.actor).where(AuditEvent.action == "automation.set")) == "root"
    # researchers may read the switch, not turn it
    assert world.client.put("/api/v1/automation", json={"enabled": True}, headers=world.h("alice")).status_code == 403
    assert world.client.get("/api/v1/automation", headers=world.h("alice")).get_json()["enabled"] is False


def test_a_grant_gets_at_most_max_auto_lanes_at_once(world, acceptor):
    set_policy(world, max_auto_lanes=1)
    acceptor.refresh()
    assert acceptor.handle(sighting(src_port=40000)) is not None
    assert acceptor.handle(sighting(src_port=40001)) is None
    assert acceptor.counts["too_many_auto_lanes"] == 1 and len(_lanes(world)) == 1


def test_a_firefly_from_another_host_for_someone_elses_flow_is_refused(world, acceptor):
    set_policy(world)
    acceptor.refresh()
    acceptor.offer(sighting(src="10.1.0.10", reporter="10.1.0.20"))  # the server speaks for the desktop
    acceptor.offer(sighting(reporter=None))
    assert acceptor.counts["spoofed_firefly"] == 2
    assert acceptor.run_pending() == [] and _lanes(world) == []


def test_fireflies_from_one_source_are_rate_bound(world, acceptor, mono):
    set_policy(world)
    acceptor.refresh()
    for port in range(40000, 40011):  # burst 10: the eleventh within the same instant is refused
        acceptor.offer(sighting(src_port=port))
    assert acceptor.counts["firefly_rate_bound"] == 1
    mono.now += 1.0  # 5 per second come back
    for port in range(41000, 41006):
        acceptor.offer(sighting(src_port=port))
    assert acceptor.counts["firefly_rate_bound"] == 2
    assert acceptor.counts["queue_full"] == 15 - 8  # the queue (8) bounds what waits, too


def test_fireflies_need_the_grant_to_allow_marks(world, acceptor):
    set_policy(world, fireflies=False)
    acceptor.refresh()
    assert acceptor.handle(sighting()) is None and acceptor.counts["fireflies_not_allowed"] == 1


def test_a_sampled_flow_below_the_threshold_gets_no_lane(world, acceptor):
    set_policy(world, min_rate_mbps=100)
    acceptor.refresh()
    slow = sighting(kind=SightingKind.SFLOW, state=SightingState.ONGOING, reporter="10.1.0.1", rate_bps=50e6)
    assert acceptor.handle(slow) is None and acceptor.counts["below_threshold"] == 1
    fast = sighting(kind=SightingKind.SFLOW, state=SightingState.ONGOING, reporter="10.1.0.1", rate_bps=150e6)
    lane_id = acceptor.handle(fast)
    got = world.client.get(f"/api/v1/lanes/{lane_id}", headers=world.h("alice")).get_json()
    assert got["trigger"]["kind"] == "sflow" and got["trigger"]["rate_bps"] == 150_000_000


def test_a_firefly_end_ends_only_the_automatic_lane_of_that_flow(world, acceptor):
    set_policy(world, max_auto_lanes=2)
    acceptor.refresh()
    requested = world.lane().get_json()["id"]  # alice's own lane for 9000 from any port
    auto_id = acceptor.handle(sighting(dst_port=9001, src_port=40000))
    sibling = acceptor.handle(sighting(dst_port=9001, src_port=40001))  # same host and port, another flow
    assert acceptor.handle(sighting(dst_port=9001, src_port=40000, state=SightingState.END)) == auto_id
    assert auto_id not in world.dataplane.active
    assert sibling in world.dataplane.active and requested in world.dataplane.active
    assert acceptor.handle(sighting(dst_port=9000, src_port=None, state=SightingState.END)) is None


def test_the_automatic_lane_belongs_to_the_grant_that_allowed_it(world, acceptor):
    """alice holds an older grant covering the same flow without automation: the automatic lane
    is decided by (and counts against) the automatic grant only."""
    from viplanes.store import records

    with world.app.extensions["viplanes"].db.write() as s:
        body = {"src_prefixes": ["10.1.0.10/32"], "dst_prefixes": ["203.0.113.0/24"], "protocols": ["tcp"]}
        body |= {"ports": ["9000-9100"], "max_duration_s": 3600, "max_lanes": 3}
        auto_grant = records.create_grant(s, records.GrantInput(principal="alice", **body), "root", 0).id
    world.grants["alice-auto"] = auto_grant
    set_policy(world, "alice-auto")
    acceptor.refresh()
    lane_id = acceptor.handle(sighting())
    got = world.client.get(f"/api/v1/lanes/{lane_id}", headers=world.h("alice")).get_json()
    assert got["grant_id"] == auto_grant == got["trigger"]["grant_id"]


def test_offer_never_raises_and_a_full_queue_drops(world, mono):
    from viplanes.auto.acceptor import Acceptor

    acc = Acceptor(world.app.extensions["viplanes"].manager, queue_size=1, clock=mono, nat_sources=frozenset())
    set_policy(world)
    acc.refresh()
    acc.offer(sighting(src_port=1))
    acc.offer(sighting(src_port=2))
    assert acc.counts["queue_full"] == 1
    acc.offer(None)  # type: ignore[arg-type]  # a detector's bug: counted, not raised
    assert acc.counts["errors"] == 1


def test_the_worker_thread_makes_the_lane(world, acceptor):
    import time

    set_policy(world)
    acceptor.start()
    try:
        acceptor.offer(sighting())
        deadline = time.monotonic() + 5
        while acceptor.counts["lanes"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        acceptor.stop()
    assert acceptor.counts["lanes"] == 1


def test_a_flow_seen_again_within_two_seconds_is_queued_once(world, acceptor, mono):
    set_policy(world, max_auto_lanes=2)
    acceptor.refresh()
    sampled = sighting(kind=SightingKind.SFLOW, state=SightingState.ONGOING, reporter="10.1.0.1", rate_bps=2e8)
    for _ in range(50):  # a sampled elephant, seen many times a second
        acceptor.offer(sampled)
    assert acceptor.counts["repeated"] == 49 and len(acceptor.run_pending()) == 1
    mono.now += 2.5
    acceptor.offer(sampled)
    assert acceptor.run_pending() == [None] and acceptor.counts["refused_duplicate_lane"] == 1
