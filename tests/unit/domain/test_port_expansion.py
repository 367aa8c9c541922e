"""Exact-port expansion for switches without masked port matches: it covers the ranges exactly,
each port once, and ``entry_count`` says how many entries that is without building them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from viplanes.domain.portmasks import FULL_MASK, entry_count, exact_ports, port_entries, port_matches, ranges_to_masks

ranges = st.lists(
    st.tuples(st.integers(1, 65535), st.integers(0, 300)).map(lambda t: (t[0], min(65535, t[0] + t[1]))),
    min_size=1,
    max_size=4,
)


@given(ranges)
def test_exact_ports_cover_the_ranges_exactly_once(rs: list[tuple[int, int]]) -> None:
    wanted = {p for lo, hi in rs for p in range(lo, hi + 1)}
    got = exact_ports(rs)
    assert all(mask == FULL_MASK for _, mask in got)
    assert sorted(v for v, _ in got) == sorted(wanted)  # no port missing, none twice, none more
    assert entry_count(rs, masked=False) == len(got)


@given(ranges, st.integers(1, 65535))
def test_masked_and_exact_entries_match_the_same_ports(rs: list[tuple[int, int]], port: int) -> None:
    inside = any(lo <= port <= hi for lo, hi in rs)
    for masked in (True, False):
        assert any(port_matches(port, v, m) for v, m in port_entries(rs, masked)) == inside
    assert entry_count(rs, masked=True) == len(ranges_to_masks(rs)) <= entry_count(rs, masked=False)
