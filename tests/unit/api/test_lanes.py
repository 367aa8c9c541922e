"""Lanes through the HTTP API: request, lifecycle in time, idempotency, conflicts, metrics."""

from __future__ import annotations

import datetime as dt

from tests.support.clock import T0


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def test_immediate_lane_is_active_in_the_answer(world):
    r = world.lane()
    assert r.status_code == 201, r.json
    lane = r.json
    assert lane["state"] == "active" and lane["reason"] == f"inside grant {world.grants['alice']}"
    assert lane["nat_ip"] == "198.51.100.193"  # desktop is private: first lane-pool address
    assert lane["starts_at"] == iso(T0) and lane["expires_at"] == iso(T0 + 600)
    assert lane["activation_ms"] is not None
    spec = world.dataplane.active[lane["id"]]
    assert (spec.src_ip, spec.dst_port, spec.nat_ip, spec.expires_at) == ("10.1.0.10", 9000, lane["nat_ip"], T0 + 600)


def test_dataplane_failure_gives_failed_with_reason_and_frees_quota(world):
    world.dataplane.fail_next = "switch s2 did not answer the barrier"
    r = world.lane()
    assert r.status_code == 201 and r.json["state"] == "failed"
    assert "s2 did not answer" in r.json["reason"]
    for port in (9001, 9002, 9003):  # quota 3: the failed lane does not count
        assert world.lane(dst_port=port).json["state"] == "active"


def test_policy_denial_is_403_with_reason_and_audited(world):
    r = world.lane(dst_port=22)
    assert r.status_code == 403
    assert r.json["error"] == "port_not_granted" and "22" in r.json["message"]
    audit = world.client.get("/api/v1/audit?decision=deny", headers=world.h("root")).json
    assert audit[0]["actor"] == "alice" and "22" in audit[0]["reason"]
    assert not world.dataplane.active


def test_quota_is_409_and_identical_lane_is_409(world):
    assert world.lane().status_code == 201
    dup = world.lane()
    assert dup.status_code == 409 and dup.json["error"] == "duplicate_lane"
    world.lane(dst_port=9001), world.lane(dst_port=9002)
    r = world.lane(dst_port=9003)
    assert r.status_code == 409 and r.json["error"] == "quota_exceeded" and "3 of 3" in r.json["message"]


def test_nat_pool_exhaustion_is_503_not_500(world, tmp_path, clock, dataplane):
    import ipaddress
    from dataclasses import replace

    from tests.support.world import make_world

    topo = world.app.extensions["viplanes"].topology
    small = replace(topo, lane_pool=replace(topo.lane_pool, prefix=ipaddress.IPv4Network("198.51.100.192/32")))
    w = make_world(f"sqlite:///{tmp_path / 'small.db'}", clock, dataplane, small)
    first, second = w.lane(dst_port=9000), w.lane(dst_port=9001)  # a /32 holds one host's address
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json["nat_ip"] == second.json["nat_ip"] == "198.51.100.192"  # shared by the host
    refused = w.lane("bob", dst_port=9002)  # another private host needs a second address
    assert refused.status_code == 503
    assert refused.json["error"] == "lane_pool_exhausted" and "198.51.100.192/32" in str(refused.json["details"])
    for lane_id in (first.json["id"], second.json["id"]):
        w.client.post(f"/api/v1/lanes/{lane_id}/release", headers=w.h("alice"))
    assert w.lane("bob", dst_port=9002).json["nat_ip"] == "198.51.100.192"  # the freed address is reused


def test_routable_source_gets_no_nat(world):
    with world.app.extensions["viplanes"].db.write() as s:
        from tests.support.world import GRANT
        from viplanes.store import records as store

        store.create_grant(
            s, store.GrantInput(principal="alice", **{**GRANT, "src_prefixes": ["198.51.100.30/32"]}), "root", T0
        )
    r = world.lane(src_ip="198.51.100.30")
    assert r.status_code == 201 and r.json["nat_ip"] is None


def test_scheduled_lane_starts_and_expires_with_the_clock(world):
    mgr = world.app.extensions["viplanes"].manager
    r = world.lane(start_at=iso(T0 + 100), duration_s=60)
    assert r.status_code == 201 and r.json["state"] == "scheduled"
    lane_id = r.json["id"]
    assert mgr.tick() == {"started": 0, "expired": 0} and lane_id not in world.dataplane.active
    world.clock.advance(100)
    assert mgr.tick()["started"] == 1
    assert world.client.get(f"/api/v1/lanes/{lane_id}", headers=world.h("alice")).json["state"] == "active"
    assert lane_id in world.dataplane.active
    world.clock.advance(60)
    assert mgr.tick()["expired"] == 1
    shown = world.client.get(f"/api/v1/lanes/{lane_id}", headers=world.h("alice")).json
    assert shown["state"] == "expired" and lane_id not in world.dataplane.active


def test_start_in_the_past_is_refused(world):
    r = world.lane(start_at=iso(T0 - 3600))
    assert r.status_code == 403 and r.json["error"] == "start_in_past"


def test_release_extend_and_stats(world):
    lane_id = world.lane().json["id"]
    stats = world.client.get(f"/api/v1/lanes/{lane_id}/stats", headers=world.h("alice")).json
    assert stats["available"] and stats["packets"] == 10
    r = world.client.post(f"/api/v1/lanes/{lane_id}/extend", json={"add_s": 600}, headers=world.h("alice"))
    assert r.status_code == 200 and r.json["expires_at"] == iso(T0 + 1200)
    assert world.dataplane.active[lane_id].expires_at == T0 + 1200  # hard timeout refreshed
    too_long = world.client.post(f"/api/v1/lanes/{lane_id}/extend", json={"add_s": 3000}, headers=world.h("alice"))
    assert too_long.status_code == 403 and too_long.json["error"] == "duration_too_long"
    r = world.client.post(f"/api/v1/lanes/{lane_id}/release", headers=world.h("alice"))
    assert r.status_code == 200 and r.json["state"] == "released" and lane_id not in world.dataplane.active
    again = world.client.post(f"/api/v1/lanes/{lane_id}/release", headers=world.h("alice"))
    assert again.status_code == 409 and again.json["error"] == "lane_not_live"


def test_revoking_a_grant_ends_its_lanes(world):
    ids = [world.lane(dst_port=p).json["id"] for p in (9000, 9001)]
    bob = world.lane("bob").json["id"]
    r = world.client.post(f"/api/v1/grants/{world.grants['alice']}/revoke", headers=world.h("root"))
    assert r.status_code == 200 and sorted(r.json["revoked_lanes"]) == sorted(ids)
    assert r.json["grant"]["state"] == "revoked"
    assert set(world.dataplane.active) == {bob}
    assert world.lane(dst_port=9005).status_code == 403  # no usable grant left
    states = {ln["id"]: ln["state"] for ln in world.client.get("/api/v1/lanes", headers=world.h("root")).json}
    assert states == {ids[0]: "revoked", ids[1]: "revoked", bob: "active"}


def test_idempotency_key_returns_the_first_answer(world):
    h = {**world.h("alice"), "Idempotency-Key": "req-42"}
    body = {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": 9000,
        "duration_s": 600,
        "purpose": "x",
    }
    first = world.client.post("/api/v1/lanes", json=body, headers=h)
    second = world.client.post("/api/v1/lanes", json=body, headers=h)
    assert first.status_code == 201 and second.status_code == 200
    assert second.json["id"] == first.json["id"]
    assert len(world.client.get("/api/v1/lanes", headers=world.h("alice")).json) == 1
    bad = world.client.post("/api/v1/lanes", json=body, headers={**world.h("alice"), "Idempotency-Key": "a b"})
    assert bad.status_code == 422


def test_list_filters(world):
    world.lane(dst_port=9000)
    world.lane(dst_port=9001)
    world.lane("bob")
    r = world.client.get("/api/v1/lanes?state=active&principal=bob", headers=world.h("root"))
    assert [ln["principal"] for ln in r.json] == ["bob"]
    assert len(world.client.get("/api/v1/lanes?limit=1", headers=world.h("root")).json) == 1
    assert world.client.get("/api/v1/lanes?state=bogus", headers=world.h("root")).status_code == 422


def test_metrics_show_states_decisions_and_latency(world):
    world.lane()
    world.lane(dst_port=22)
    text = world.client.get("/metrics").data.decode()
    assert 'viplanes_lanes{state="active"} 1.0' in text
    assert 'viplanes_decisions_total{code="allowed",decision="allow"} 1.0' in text
    assert 'viplanes_decisions_total{code="port_not_granted",decision="deny"} 1.0' in text
    assert 'viplanes_activation_seconds_count{outcome="ok"} 1.0' in text
    assert world.client.get("/healthz").json == {"status": "ok"}


def test_desired_lanes_rebuilds_the_dataplane(world):
    ids = {world.lane(dst_port=p).json["id"] for p in (9000, 9001)}
    world.dataplane.active.clear()  # the controller restarted and lost everything
    world.app.extensions["viplanes"].manager.dataplane.attach_source(
        world.app.extensions["viplanes"].manager.desired_lanes
    )
    world.dataplane.reconcile()
    assert set(world.dataplane.active) == ids


def test_identical_lane_of_another_researcher_is_409_without_its_id(world):
    mine = world.lane().json["id"]
    r = world.lane("bob", src_ip="10.1.0.10")  # bob's grant covers the desktop too
    assert r.status_code == 409 and r.json["error"] == "duplicate_lane"
    assert r.json["details"] == {} and str(mine) not in r.json["message"]
    own = world.lane()
    assert own.json["details"] == {"lane_id": mine}
    other_port = world.lane("bob", src_ip="10.1.0.10", src_port=40000, dst_port=9001)
    assert other_port.status_code == 201  # a different flow is fine


def test_disabling_a_principal_revokes_its_lanes(world):
    ids = [world.lane(dst_port=p).json["id"] for p in (9000, 9001)]
    bob = world.lane("bob").json["id"]
    r = world.client.post("/api/v1/principals/alice/disable", headers=world.h("root"))
    assert r.status_code == 200 and r.json["disabled"] and sorted(r.json["revoked_lanes"]) == sorted(ids)
    assert set(world.dataplane.active) == {bob}  # alice's flows are gone, bob's stay
    rows = {ln["id"]: ln for ln in world.client.get("/api/v1/lanes", headers=world.h("root")).json}
    assert {i: rows[i]["state"] for i in (*ids, bob)} == {ids[0]: "revoked", ids[1]: "revoked", bob: "active"}
    assert rows[ids[0]]["reason"] == "principal alice disabled"
    audit = world.client.get("/api/v1/audit?action=principal.disable", headers=world.h("root")).json
    assert audit[0]["reason"] == f"ended lanes {r.json['revoked_lanes']}"
    again = world.client.post("/api/v1/principals/alice/disable", headers=world.h("root"))
    assert again.status_code == 200 and again.json["revoked_lanes"] == []
