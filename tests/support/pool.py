"""The lane pool's address choice, checked on SQLite (unit/lanes/test_pool.py) and PostgreSQL
(integration/test_postgres_api.py, where the pool lookup takes its VALUES form)."""

from __future__ import annotations

from typing import Any

from tests.support.world import World


def distinct_hosts_lowest_free_address_and_sharing(world: World) -> None:
    """Hosts get the lowest free pool addresses, distinct per host, shared by one host's live
    lanes and free again once the last of them ends."""
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


def release(w: World, lane: Any) -> None:
    """alice releases ``lane`` (a creation response)."""
    r = w.client.post(f"/api/v1/lanes/{lane.json['id']}/release", headers=w.h("alice"))
    assert r.status_code == 200, r.json
