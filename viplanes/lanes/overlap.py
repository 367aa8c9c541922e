"""No two live lanes of one source may carry the same packet in the same time.

Two lanes matching one packet would install flows that overwrite (same match) or shadow (masked
port entries of one priority) each other, and the lane whose counters grow would be arbitrary.
With destination sets a request overlaps an existing lane when some destination network of each
intersects and some port range of each intersects (same protocol, same source, windows overlap).
"""

from __future__ import annotations

import functools
import ipaddress
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import CompoundSelect, Connection, Select, bindparam, literal_column, select, union_all
from sqlalchemy.orm import Session

from viplanes.domain.values import host_net
from viplanes.store.db import Database
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.lanesql.core import LANES, LIVE
from viplanes.store.models import LIVE_STATES
from viplanes.topologies.model import Topology

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network
PortRanges = Sequence[tuple[int, int]]


def source_aliases(topology: Topology, src: str) -> list[str]:
    """Every address of the host ``src`` names, its IPv4 address first (the lock key): two lanes
    of one host overlap whichever of its addresses each was asked under."""
    host = topology.host_by_ip(src)
    if host is None:
        return [src]
    return [str(a) for a in (host.address_for(4), host.address_for(6)) if a is not None] or [src]


def row_nets(dst_ip: str | None, dst_nets: list[str] | None) -> list[str]:
    """A lane row's destinations: the JSON set, or the one ``dst_ip`` of a pre-0004 / single lane."""
    if dst_nets:
        return list(dst_nets)
    return [host_net(dst_ip)] if dst_ip else []


def row_ports(dst_port: int | None, dst_ports: list[Any] | None) -> list[tuple[int, int]]:
    if dst_ports:
        return [(int(lo), int(hi)) for lo, hi in dst_ports]
    return [(dst_port, dst_port)] if dst_port is not None else []


def nets_overlap(a: Iterable[IPNet], b: Iterable[IPNet]) -> bool:
    b = list(b)
    return any(x.version == y.version and x.overlaps(y) for x in a for y in b)


def ports_overlap(a: PortRanges, b: PortRanges) -> bool:
    return any(lo1 <= hi2 and lo2 <= hi1 for lo1, hi1 in a for lo2, hi2 in b)


@functools.cache
def _overlap_query(single: bool, with_sport: bool, with_exclude: bool) -> CompoundSelect | Select:
    """Built once per shape (building costs more than running it; see viplanes/store/lanesql/core.py)."""
    base = select(LANES.c.id, LANES.c.dst_ip, LANES.c.dst_port, LANES.c.dst_nets, LANES.c.dst_ports).where(
        # a host has at most two addresses (v4, v6): two fixed parameters, not an expanding IN, so
        # the statement stays one compiled text (``rawsql``'s fast path)
        LANES.c.src_ip.in_([bindparam("src"), bindparam("src2")]),
        LANES.c.protocol == bindparam("proto"),
        LANES.c.starts_at < bindparam("end"),
        LANES.c.expires_at > bindparam("start"),
    )
    if with_sport:  # a lane without src_port covers every source port
        base = base.where(LANES.c.src_port.is_(None) | (LANES.c.src_port == bindparam("sport")))
    if with_exclude:
        base = base.where(LANES.c.id != bindparam("exclude"))
    if not single:
        return base.where(LIVE)
    # Two seeks on ix_lanes_flow (src_ip, dst_ip, dst_port), as two arms of one UNION ALL (one
    # round trip; SQLite plans each arm on its own): as one OR, SQLite walked every live lane of
    # the source (request p50 2.4 -> 4.9 ms at 3,000 lanes). For the second arm, SQLite's planner
    # (no statistics) would still rather walk ix_lanes_src_state; a state test on ``state || ''``
    # cannot use an index, which leaves it ix_lanes_flow (EXPLAIN QUERY PLAN: "SEARCH lanes USING
    # INDEX ix_lanes_flow (src_ip=? AND dst_ip=?)").
    unindexed_state = LANES.c.state.concat("").in_([literal_column(f"'{s}'") for s in LIVE_STATES])
    return union_all(
        base.where(LIVE, LANES.c.dst_ip == bindparam("dst"), LANES.c.dst_port == bindparam("dport")),
        base.where(unindexed_state, LANES.c.dst_ip.is_(None)),
    )


def overlap_key(srcs: Sequence[str], proto: str) -> int:
    """The advisory lock that serialises overlap decisions per (source host, protocol)."""
    return (1 << 32) + zlib.crc32(f"{srcs[0]}|{proto}".encode())


def overlap_query(
    srcs: Sequence[str],
    proto: str,
    nets: Sequence[IPNet],
    ports: PortRanges,
    sport: int | None,
    start: float,
    end: float,
    exclude: int | None = None,
) -> tuple[CompoundSelect | Select, dict[str, Any]]:
    """The candidate lanes' query and its parameters (``first_overlap`` judges their rows).
    A single-flow request reads only lanes with the same address and port or with a set (a
    source may hold thousands of plain lanes: the benchmarks do); a set request reads the
    source's live lanes of that protocol."""
    single = len(nets) == 1 and nets[0].num_addresses == 1 and len(ports) == 1 and ports[0][0] == ports[0][1]
    params: dict[str, Any] = {"src": srcs[0], "src2": srcs[-1], "proto": proto, "start": start, "end": end}
    if sport is not None:
        params["sport"] = sport
    if exclude is not None:
        params["exclude"] = exclude
    if single:
        params["dst"], params["dport"] = str(nets[0].network_address), ports[0][0]
    return _overlap_query(single, sport is not None, exclude is not None), params


def first_overlap(rows: Iterable[Sequence[Any]], nets: Sequence[IPNet], ports: PortRanges) -> int | None:
    """The id of the first candidate row (id, dst_ip, dst_port, dst_nets, dst_ports) that would
    carry some packet of ``nets`` x ``ports``, or None."""
    for lane_id, dst_ip, dst_port, dst_nets, dst_ports in rows:
        theirs = [ipaddress.ip_network(n) for n in row_nets(dst_ip, dst_nets)]
        if nets_overlap(nets, theirs) and ports_overlap(ports, row_ports(dst_port, dst_ports)):
            return int(lane_id)
    return None


def overlapping_lane(
    s: Session | Connection,
    db: Database,
    src: str | Sequence[str],
    proto: str,
    nets: Sequence[IPNet],
    ports: PortRanges,
    sport: int | None,
    start: float,
    end: float,
    exclude: int | None = None,
    then_lock: int | None = None,
) -> int | None:
    """The id of a live lane that would carry some packet this one carries, or None.

    Serialised per (source, protocol) by an advisory lock (PostgreSQL; SQLite writes are serial).
    ``then_lock``: an advisory key the caller needs next in this transaction (the lane pool's),
    taken after this one in the same round trip.
    """
    srcs = [src] if isinstance(src, str) else list(src)  # a host's addresses (``source_aliases``)
    db.advisory_lock(s, overlap_key(srcs, proto), then_lock)
    query, params = overlap_query(srcs, proto, nets, ports, sport, start, end, exclude)
    return first_overlap(rawsql.rows(s, query, params), nets, ports)
