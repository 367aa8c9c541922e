"""Lane-pool allocation through the API: the indexed per-address probe keeps its semantics."""

from __future__ import annotations

from tests.support.pool import distinct_hosts_lowest_free_address_and_sharing


def test_distinct_hosts_lowest_free_address_and_sharing(world):
    distinct_hosts_lowest_free_address_and_sharing(world)


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
