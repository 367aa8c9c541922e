"""A firefly flood from one grant does not block another grant's automatic lanes, nor a new
host's first firefly (issue 41): the acceptor's queue is shared per grant and per source prefix
(viplanes/auto/fairqueue.py), and a prefix's fireflies share one bucket (bounds.py)."""

from __future__ import annotations

from ipaddress import IPv6Address, ip_address

from tests.unit.auto.conftest import set_policy, sighting
from viplanes.auto.acceptor import Acceptor
from viplanes.auto.bounds import SourceBound
from viplanes.auto.fairqueue import FairQueue
from viplanes.store import records as store

FLOOD_NET = "2001:db8:1::/64"


def _flood_grant(world) -> None:
    """alice's second grant: a whole /64 of sources, automation on (what makes 3,000 easy)."""
    db = world.app.extensions["viplanes"].db
    with db.write() as s:
        grant = store.GrantInput(
            principal="alice",
            src_prefixes=[FLOOD_NET],
            dst_prefixes=["2001:db8:ff::/64"],
            protocols=["tcp"],
            ports=["9000-9100"],
            max_duration_s=3600,
        )
        world.grants["flood"] = store.create_grant(s, grant, "root", world.clock()).id
    set_policy(world, grant="flood")
    set_policy(world, grant="bob")


def test_another_grants_sighting_is_served_at_once_behind_a_3000_source_flood(world, mono) -> None:
    _flood_grant(world)
    acc = Acceptor(world.app.extensions["viplanes"].manager, queue_size=256, clock=mono, nat_sources=frozenset())
    acc.refresh()
    base = int(IPv6Address("2001:db8:1::"))
    for n in range(3000):  # each source inside its own bucket, every one of the flood's lines full
        src = str(IPv6Address(base + 0x100 + n))
        acc.offer(sighting(src=src, dst="2001:db8:ff::10", src_port=40000 + n % 20000))
        mono.now += 0.0002
    flood_dropped = acc.counts["queue_full"] + acc.counts["firefly_rate_bound"]
    assert flood_dropped > 2000, acc.counts
    elephant = sighting(src="10.1.0.20", dst_port=9050)  # bob's grant (and alice's first one)
    acc.offer(elephant)
    assert acc.counts["queue_full"] + acc.counts["firefly_rate_bound"] == flood_dropped, acc.counts
    first = [acc._queue.get_nowait() for _ in range(2)]
    assert elephant in first, "another grant's sighting waits behind at most one of the flood's"


def test_a_new_hosts_first_firefly_is_accepted_while_4096_sources_flood() -> None:
    """4,096 addresses of one /64, each within its own 5/s, filled the per-source table and a new
    host's first firefly was refused every second. The /64's shared bucket keeps the flood to a
    few live entries."""
    bound = SourceBound(rate_per_s=5, burst=10, max_sources=4096)
    base = int(IPv6Address("2001:db8:1::"))
    now = 0.0
    refused_new = 0
    for second in range(3):
        for _round in range(6):  # every source 6 times a second: never idle within 3 s of burst
            for n in range(4096):
                bound.allow(IPv6Address(base + 1 + n), now)
            now += 1 / 6
        if not bound.allow(ip_address(f"10.1.0.{100 + second}"), now):  # a new host each second
            refused_new += 1
    assert refused_new == 0


def test_fair_queue_serves_grants_and_prefixes_round_robin() -> None:
    q: FairQueue[str] = FairQueue(total=8)
    for item, prefix in (("a0", 0), ("a1", 1), ("a2", 2), ("a3", 0)):
        assert q.put(item, "A", prefix)
    assert q.put("b0", "B", 0) and q.put("b1", "B", 1)
    order = [q.get_nowait() for _ in range(6)]
    assert order == ["a0", "b0", "a1", "b1", "a2", "a3"]
    assert q.get_nowait() is None
    capped: FairQueue[str] = FairQueue(total=8, per_prefix=2)
    assert [capped.put(f"c{n}", "C", 0) for n in range(3)] == [True, True, False]


def test_a_full_queue_gives_a_smaller_grants_newcomer_the_biggest_grants_newest_place() -> None:
    q: FairQueue[str] = FairQueue(total=4)
    for n in range(4):
        assert q.put(f"a{n}", "A", 0)
    assert q.put("b0", "B", 0)  # A's newest gives way
    assert q.displaced == 1 and len(q) == 4
    assert q.put("a4", "A", 0) is False  # the biggest grant never displaces a smaller one
    assert sorted(iter(q.get_nowait, None)) == ["a0", "a1", "a2", "b0"]


def test_a_new_prefix_of_the_flooding_grant_gets_a_place() -> None:
    q: FairQueue[str] = FairQueue(total=4)
    for n in range(4):
        assert q.put(f"flood{n}", "A", "2001:db8:1::/64")
    assert q.put("flood4", "A", "2001:db8:1::/64") is False
    assert q.put("newhost", "A", "10.1.0.0/24")  # the flood's own newest gives way
    assert [q.get_nowait() for _ in range(2)] == ["flood0", "newhost"]
