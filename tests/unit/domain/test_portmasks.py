"""Range-to-mask expansion: exact cover, and as few entries as any prefix cover can have."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from viplanes.domain.portmasks import (
    MAX_ENTRIES_PER_RANGE,
    PortRangeError,
    format_port_ranges,
    parse_port_ranges,
    port_matches,
    range_to_masks,
    ranges_to_masks,
)


def minimal_prefix_cover(lo: int, hi: int, base: int = 0, size: int = 1 << 16) -> int:
    """Independent oracle: walk the binary trie; a node wholly inside the range is one entry."""
    end = base + size - 1
    if end < lo or base > hi:
        return 0
    if lo <= base and end <= hi:
        return 1
    half = size // 2
    return minimal_prefix_cover(lo, hi, base, half) + minimal_prefix_cover(lo, hi, base + half, half)


ports = st.integers(1, 65535)


@given(ports, ports)
@settings(max_examples=300, deadline=None)
def test_every_port_in_range_matches_and_none_outside(a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    masks = range_to_masks(lo, hi)
    probe = {lo, hi, lo - 1, hi + 1, (lo + hi) // 2, 1, 65535} | set(
        range(max(1, lo - 3), min(65535, hi + 3) + 1) if hi - lo < 300 else ()
    )
    for port in probe:
        if 0 <= port <= 65535:
            hit = any(port_matches(port, v, m) for v, m in masks)
            assert hit == (lo <= port <= hi), (port, lo, hi, masks)
    assert len(masks) == minimal_prefix_cover(lo, hi)
    assert len(masks) <= MAX_ENTRIES_PER_RANGE


def test_exhaustive_small_window() -> None:
    """A whole window checked port by port (hypothesis samples; this leaves no gap)."""
    masks = range_to_masks(50000, 51000)
    for port in range(49000, 52001):
        assert any(port_matches(port, v, m) for v, m in masks) == (50000 <= port <= 51000)
    assert len(masks) == 9


@given(st.lists(st.tuples(ports, ports), min_size=1, max_size=5))
@settings(max_examples=200, deadline=None)
def test_lists_merge_before_expanding(pairs: list[tuple[int, int]]) -> None:
    ranges = [(min(a, b), max(a, b)) for a, b in pairs]
    masks = ranges_to_masks(ranges)
    merged = parse_port_ranges([f"{lo}-{hi}" for lo, hi in ranges])
    assert len(masks) == sum(minimal_prefix_cover(lo, hi) for lo, hi in merged)
    for lo, hi in ranges:
        for port in (lo, hi):
            assert any(port_matches(port, v, m) for v, m in masks)


def test_edges() -> None:
    assert range_to_masks(5201, 5201) == [(5201, 0xFFFF)]
    assert range_to_masks(0, 65535) == [(0, 0)]
    assert len(range_to_masks(1, 65535)) == 16
    assert len(range_to_masks(1, 65534)) == MAX_ENTRIES_PER_RANGE


@pytest.mark.parametrize(
    "given_, expected",
    [
        ("50000-51000", ((50000, 51000),)),
        ([5201, "9000-9100"], ((5201, 5201), (9000, 9100))),
        ([5201, 5202, "5203-5210"], ((5201, 5210),)),
        (443, ((443, 443),)),
    ],
)
def test_parse(given_: object, expected: tuple[tuple[int, int], ...]) -> None:
    assert parse_port_ranges(given_) == expected  # type: ignore[arg-type]
    assert format_port_ranges(expected)


@pytest.mark.parametrize("bad", ["0-10", "10-5", "70000", "a-b", "5-", "-5", [], [True], ["1-2-3"], [1.5]])
def test_parse_refuses(bad: object) -> None:
    with pytest.raises(PortRangeError):
        parse_port_ranges(bad)  # type: ignore[arg-type]
