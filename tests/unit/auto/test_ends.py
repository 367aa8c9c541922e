"""Automatic lanes end by themselves: after their idle time without traffic (read from the lane's
counters), and when automation is taken away; a lane still carrying traffic stays."""

from __future__ import annotations

from sqlalchemy import select

from tests.unit.auto.conftest import set_policy, sighting
from viplanes.auto.ender import IdleEnder
from viplanes.domain.values import LaneCounters
from viplanes.store.models import AuditEvent, Lane


def _state(world, lane_id):
    with world.app.extensions["viplanes"].db.read() as s:
        return s.scalar(select(Lane.state).where(Lane.id == lane_id))


def test_an_idle_automatic_lane_ends_after_its_idle_time_and_a_busy_one_stays(world, acceptor, monkeypatch):
    set_policy(world, idle_s=10, max_auto_lanes=2)
    acceptor.refresh()
    idle = acceptor.handle(sighting(src_port=40000))
    busy = acceptor.handle(sighting(src_port=40001))
    requested = world.lane(dst_port=9002).get_json()["id"]  # a requested lane never idles out
    carried = {idle: 5000, busy: 5000, requested: 0}

    def counters(lane_id):
        return LaneCounters(packets=1, bytes=carried[lane_id]) if lane_id in world.dataplane.active else None

    monkeypatch.setattr(world.dataplane, "counters", counters)
    ender = IdleEnder(world.app.extensions["viplanes"].manager)
    assert ender.check() == []  # first reading
    for _ in range(3):
        world.clock.advance(4)
        carried[busy] += 1_000_000
        ended = ender.check()
    assert ended == [idle] and _state(world, idle) == "released"
    assert _state(world, busy) == "active" and _state(world, requested) == "active"
    with world.app.extensions["viplanes"].db.read() as s:
        actor = s.scalar(
            select(AuditEvent.actor).where(AuditEvent.target == f"lane:{idle}", AuditEvent.action == "lane.release")
        )
    assert actor == "auto:idle"


def test_a_lane_without_stats_is_not_ended_as_idle(world, acceptor, monkeypatch):
    set_policy(world, idle_s=1)
    acceptor.refresh()
    lane_id = acceptor.handle(sighting())
    monkeypatch.setattr(world.dataplane, "counters", lambda _lane_id: None)
    ender = IdleEnder(world.app.extensions["viplanes"].manager)
    for _ in range(3):
        world.clock.advance(5)
        assert ender.check() == []
    assert _state(world, lane_id) == "active"


def test_the_sweep_revokes_automatic_lanes_whose_automation_went_away(world, acceptor):
    """Another process switched automation off (the API ends lanes it sees; this is the safety net)."""
    from viplanes.store import automation as auto

    set_policy(world)
    acceptor.refresh()
    lane_id = acceptor.handle(sighting())
    with world.app.extensions["viplanes"].db.write() as s:
        auto.set_automation(s, False, "elsewhere", world.clock())
    assert IdleEnder(world.app.extensions["viplanes"].manager).check() == [lane_id]
    assert _state(world, lane_id) == "revoked"


def test_the_far_ends_packets_do_not_keep_a_lane_up(world, acceptor, monkeypatch):
    """Issue 41: the idle end counted both directions, so the far end (or anyone spoofing it)
    kept an automatic lane up to its maximum length. Only the campus side's bytes count."""
    set_policy(world, idle_s=10)
    acceptor.refresh()
    lane_id = acceptor.handle(sighting())
    far_end = [0]

    def counters(_lane_id):
        far_end[0] += 1_000_000  # the cloud keeps sending; the desktop has gone quiet
        return LaneCounters(packets=far_end[0] // 1000, bytes=5000 + far_end[0], forward_bytes=5000)

    monkeypatch.setattr(world.dataplane, "counters", counters)
    ender = IdleEnder(world.app.extensions["viplanes"].manager)
    ended = ender.check()
    for _ in range(3):
        world.clock.advance(4)
        ended = ender.check()
    assert ended == [lane_id] and _state(world, lane_id) == "released"
