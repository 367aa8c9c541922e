"""Lane-pool allocation through the API: the indexed per-address probe keeps its semantics."""

from __future__ import annotations


def release(w, lane) -> None:  # type: ignore[no-untyped-def]
    r = w.client.post(f"/api/v1/lanes/{lane.json['id']}/release", headers=w.h("alice"))
    assert r.status_code == 200, r.json


def test_distinct_hosts_lowest_free_address_and_sharing(world):
    a1 = world.lane(dst_port=9000)
    b1 = world.lane("bob", dst_port=9001)
    assert (a1.status_code, b1.status_code) == (201, 201)
    assert (a1.json["nat_ip"], b1.json["nat_ip"]) == ("198.51.100.193", "198.51.100.194")  # lowest first, distinct
    a2 = world.lane(dst_port=9002)
    assert a2.json["nat_ip"] == "198.51.100.193"  # shared by the host's live lanes
    release(world, a1)
    assert world.lane(dst_port=9003).json["nat_ip"] == "198.51.100.193"  # still held by a2
    release(world, a2)
    b2 = world.lane("bob", dst_port=9004)
    assert b2.json["nat_ip"] == "198.51.100.194"  # bob keeps his address while b1 is live


def test_large_pool_falls_back_to_reading_live_addresses(world, tmp_path, clock, dataplane):
    import ipaddress
    from dataclasses import replace

    from tests.support.world import make_world

    topo = world.app.extensions["viplanes"].topology
    big = replace(topo, lane_pool=replace(topo.lane_pool, prefix=ipaddress.IPv4Network("100.64.0.0/22")))
    w = make_world(f"sqlite:///{tmp_path / 'big.db'}", clock, dataplane, big)
    assert (w.lane(dst_port=9000).json["nat_ip"], w.lane("bob", dst_port=9001).json["nat_ip"]) == (
        "100.64.0.1",
        "100.64.0.2",
    )
