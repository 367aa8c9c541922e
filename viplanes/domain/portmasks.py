"""Port ranges -> the fewest masked transport-port matches (``tcp_dst=value/mask``).

OpenFlow 1.3 lets OVS match ``tcp_dst``/``udp_dst`` with a bit mask, so a range of ports is carried
by the aligned power-of-two blocks that tile it: 50000-51000 becomes 9 ``(value, mask)`` pairs,
not 1001 exact flows. The greedy split (take the largest aligned block starting at ``lo`` that does
not pass ``hi``) is the classic range-to-prefix expansion and is minimal among prefix covers; a
16-bit range never needs more than 2*16-2 = 30 entries. Pure and stdlib-only: the API (to count and
refuse) and the compiler (to build matches) both import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from viplanes.domain.values import is_decimal

PORT_BITS = 16
FULL_MASK = (1 << PORT_BITS) - 1
MAX_ENTRIES_PER_RANGE = 2 * PORT_BITS - 2

PortRange = tuple[int, int]  # inclusive
PortMatch = tuple[int, int]  # (value, mask); mask 0xffff is an exact port


class PortRangeError(ValueError):
    """A port or range that is not inside 1..65535, or is reversed, or cannot be read."""


def parse_port_ranges(items: int | str | Iterable[int | str]) -> tuple[PortRange, ...]:
    """5201, "9000-9100", or a list of them -> merged, sorted inclusive ranges."""
    if isinstance(items, (int, str)):
        items = [items]
    out: list[PortRange] = []
    for item in items:
        if isinstance(item, bool):
            raise PortRangeError(f"not a port: {item!r}")
        if isinstance(item, int):
            lo = hi = item
        elif isinstance(item, str):
            lo_s, sep, hi_s = item.strip().partition("-")
            if not is_decimal(lo_s.strip()) or (sep and not is_decimal(hi_s.strip())) or len(item) > 11:
                raise PortRangeError(f"not a port or range like 9000-9100: {item!r}")
            lo = int(lo_s)
            hi = int(hi_s) if sep else lo
        else:
            raise PortRangeError(f"not a port or range: {item!r}")
        if not 1 <= lo <= hi <= FULL_MASK:
            raise PortRangeError(f"port range out of 1..65535 or reversed: {item!r}")
        out.append((lo, hi))
    if not out:
        raise PortRangeError("no ports given")
    return merge_ranges(out)


def merge_ranges(ranges: Iterable[PortRange]) -> tuple[PortRange, ...]:
    """Sorted, with overlapping and adjacent ranges joined (so expansion sees maximal ranges)."""
    merged: list[PortRange] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def format_port_ranges(ranges: Sequence[PortRange]) -> list[str]:
    return [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges]


def range_to_masks(lo: int, hi: int) -> list[PortMatch]:
    """Inclusive ``lo..hi`` (0..65535) -> the fewest (value, mask) pairs covering exactly it."""
    if not 0 <= lo <= hi <= FULL_MASK:
        raise PortRangeError(f"bad range {lo}-{hi}")
    out: list[PortMatch] = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << PORT_BITS  # largest block aligned at lo
        while lo + size - 1 > hi:
            size >>= 1
        out.append((lo, FULL_MASK & ~(size - 1)))
        lo += size
    return out


def ranges_to_masks(ranges: Iterable[PortRange]) -> list[PortMatch]:
    """Every range of a lane, merged first so no entry is spent twice."""
    return [m for lo, hi in merge_ranges(ranges) for m in range_to_masks(lo, hi)]


def mask_count(ranges: Iterable[PortRange]) -> int:
    return len(ranges_to_masks(ranges))


def exact_ports(ranges: Iterable[PortRange]) -> list[PortMatch]:
    """Every port of the ranges as its own exact match: what a switch without masked port matches
    (``masked_ports: false``, docs/hardware.md) needs to carry a range."""
    return [(port, FULL_MASK) for lo, hi in merge_ranges(ranges) for port in range(lo, hi + 1)]


def port_entries(ranges: Iterable[PortRange], masked: bool) -> list[PortMatch]:
    """The port matches one switch needs: the minimal prefix cover where it has masks, else exact."""
    return ranges_to_masks(ranges) if masked else exact_ports(ranges)


def entry_count(ranges: Iterable[PortRange], masked: bool) -> int:
    """``len(port_entries(...))`` without building 65,535 tuples for a wide exact range."""
    merged = merge_ranges(ranges)
    return mask_count(merged) if masked else sum(hi - lo + 1 for lo, hi in merged)


def port_matches(port: int, value: int, mask: int) -> bool:
    return port & mask == value & mask
