"""The hold of pre-NAT sightings waiting for their post-NAT pair (``viplanes/auto/nathold.py``):
a sighting comes back once when a post-NAT sighting of its destination arrives, or is dropped
(unpaired) when its hold ends; a flood of sightings that never pair is bounded in count, per
source and in time."""

from __future__ import annotations

from ipaddress import ip_address

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from viplanes.auto.nathold import HeldSightings
from viplanes.domain.sighting import Sighting, SightingKind, SightingState

NAT_BOX, CLOUD = "198.51.100.2", "203.0.113.10"


def seen(src: str = "10.1.0.10", sport: int = 40000, dport: int = 5201, rate: float | None = 15e6) -> Sighting:
    return Sighting(
        kind=SightingKind.SFLOW,
        state=SightingState.ONGOING,
        src_ip=ip_address(src),
        dst_ip=ip_address(CLOUD),
        protocol=6,
        src_port=sport,
        dst_port=dport,
        observed_at=10.0,
        rate_bps=rate,
    )


def post(dport: int = 5201) -> Sighting:
    return seen(NAT_BOX, 51234, dport)


def test_a_held_sighting_comes_back_once_when_its_pair_is_sampled() -> None:
    held = HeldSightings(hold_s=0.5)
    s = seen()
    assert held.hold(s, now=100.0) == "held"
    assert held.release(post(dport=5202)) == []  # another destination port: not its pair
    assert held.release(post()) == [s]
    assert held.release(post()) == []  # a second post-NAT sample brings nothing back
    assert held.due(100.6) == []  # released: not unpaired at the hold's end
    assert len(held) == 0


def test_a_sighting_whose_pair_never_comes_is_unpaired_at_the_holds_end() -> None:
    held = HeldSightings(hold_s=0.5)
    s = seen()
    held.hold(s, now=100.0)
    assert held.due(100.4) == []
    assert held.due(100.5) == [s] and len(held) == 0


def test_a_flow_is_held_once_per_hold() -> None:
    """A released sighting judged unpaired again (its pair outside the window, say) is not held
    a second time: it is unpaired at once, as without a hold."""
    held = HeldSightings(hold_s=0.5)
    held.hold(seen(), 100.0)
    held.release(post())
    assert held.hold(seen(), 100.1) == "again"
    held.due(100.5)
    assert held.hold(seen(), 100.6) == "held"  # a later sighting gets its own hold


def test_a_flood_is_capped_in_all_and_per_source() -> None:
    held = HeldSightings(hold_s=0.5, max_held=8, max_per_source=3)
    answers = [held.hold(seen(sport=40000 + i), 100.0) for i in range(5)]
    assert answers == ["held"] * 3 + ["full"] * 2  # one host holds at most 3
    others = [held.hold(seen(src=f"10.1.0.{20 + i}"), 100.0) for i in range(8)]
    assert others == ["held"] * 5 + ["full"] * 3 and len(held) == 8  # at most 8 in all
    assert len(held.due(100.5)) == 8 and len(held) == 0
    assert held.hold(seen(), 100.6) == "held"  # the flood's end frees the table


@pytest.mark.parametrize(
    "s, hold_s", [(seen(rate=None), 0.5), (seen(), 0.0)], ids=["no rate: never pairable", "hold off"]
)
def test_unholdable(s: Sighting, hold_s: float) -> None:
    assert HeldSightings(hold_s=hold_s).hold(s, 100.0) == "unholdable"


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        HeldSightings(hold_s=-1)


step = st.tuples(
    st.sampled_from(["hold", "hold", "release", "tick"]),
    st.integers(0, 3),  # source host
    st.integers(0, 3),  # source port
    st.integers(0, 2),  # destination port
    st.sampled_from([0.0, 0.0, 0.1, 0.3]),  # time step
)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=60))
def test_every_held_sighting_comes_back_at_most_once_and_the_table_stays_bounded(steps: list) -> None:
    """Whatever the order of sightings, releases and time: never more than the caps, each held
    sighting handed back (released or unpaired) exactly once, and nothing held past its hold."""
    held = HeldSightings(hold_s=0.5, max_held=6, max_per_source=2)
    now, holds, back = 100.0, 0, 0
    ends: list[tuple[str, float]] = []  # (source, hold's end) of every "held" answer
    for op, host, sport, dport, dt in steps:
        now += dt
        back += len(held.due(now))
        src = f"10.1.0.{10 + host}"
        if op == "hold" and held.hold(seen(src=src, sport=40000 + sport, dport=5201 + dport), now) == "held":
            holds += 1
            ends.append((src, now + 0.5))
        elif op == "release":
            back += len(held.release(post(5201 + dport)))
        live = [s for s, end in ends if end > now]
        assert len(held) == len(live) <= 6
        assert all(live.count(s) <= 2 for s in live)
        assert back <= holds
    back += len(held.due(now + 0.5))
    assert back == holds and len(held) == 0
