"""Lane-pool address allocation: which pool address a NAT'd host's lanes translate to.

One lane-pool address per host, shared by all its live lanes: the translation is stateless 1:1
(host <-> address) and lanes of one host differ by their ports, so the pool bounds concurrent
hosts, not concurrent lanes. Kept apart from the lane state machine because it is the only
part of lane creation that serialises (one allocation at a time, under an advisory lock).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    Select,
    String,
    bindparam,
    column,
    exists,
    func,
    literal_column,
    select,
    text,
    union_all,
)
from sqlalchemy.orm import Session

from viplanes.policy.rules import allocate_nat
from viplanes.store.db import Database
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.lanesql.core import LANES, LIVE
from viplanes.store.models import LIVE_STATES, Lane
from viplanes.topologies.model import Host

MAX_POOL_PROBES = 256  # lane-pool addresses probed one by one (indexed EXISTS) per allocation
NAT_LOCK_KEY = 0x56495031  # pg advisory lock: one lane-pool allocation at a time
POOL_SRC = "pool_src"  # the host's parameter in ``LanePool.lookup_for_pg`` (beside other statements' ``src``)


def _host_address(param: str = "src") -> Select:
    """The address a host's live lanes already use (built once: see viplanes/store/lanesql/core.py)."""
    return select(LANES.c.nat_ip).where(LANES.c.src_ip == bindparam(param), LIVE, LANES.c.nat_ip.is_not(None)).limit(1)


_HOST_ADDRESS = _host_address()


def needs_pool_address(host: Host | None, nets: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    """A lane takes a lane-pool address when its host is NAT'd and it carries IPv4 (IPv6 leaves
    from the host's own address)."""
    return host is not None and host.needs_nat and any(n.version == 4 for n in nets)


class LanePool:
    """Allocates lane-pool addresses from one prefix, reading live lanes from the database."""

    def __init__(self, prefix: ipaddress.IPv4Network) -> None:
        self.prefix = prefix
        # Built once: building the pool's EXISTS probes costs more than running them. A pool too
        # large for one row of probes (not the campus /27) falls back to reading live nat_ips.
        self._addresses = [str(a) for a in prefix.hosts()]
        probes = (
            [exists().where(LANES.c.nat_ip == a, LIVE) for a in self._addresses]
            if 0 < len(self._addresses) <= MAX_POOL_PROBES
            else []
        )
        self._probe = select(*probes) if probes else None
        self._lookup = _one_statement_lookup(self._addresses) if probes else None
        self._lookup_pg = _one_statement_lookup(self._addresses, as_values=True) if probes else None
        # the same, its host bound as ``POOL_SRC``: a part of a larger PostgreSQL statement
        # (viplanes/store/lanesql/gather.py: the read of a request's decision)
        self.lookup_for_pg = _one_statement_lookup(self._addresses, True, POOL_SRC) if probes else None

    def taken(self, s: Session | Connection) -> list[str]:
        """Lane-pool addresses held by a live lane: one indexed EXISTS per pool address.

        The pool is small (a /27) and each probe is an index seek on (nat_ip, state), so the
        cost does not grow with the number of live lanes (scanning their nat_ip did).
        """
        if self._probe is None:
            return list(
                s.scalars(select(Lane.nat_ip).where(Lane.nat_ip.is_not(None), Lane.state.in_(LIVE_STATES)).distinct())
            )
        return [a for a, taken in zip(self._addresses, s.execute(self._probe).one(), strict=True) if taken]

    def address_for(self, db: Database, s: Session | Connection, src_ip: str, locked: bool = False) -> str | None:
        """The address ``src_ip``'s live lanes already use, else the lowest free one; None if exhausted.

        Takes the allocation lock in ``s`` (held until its transaction ends), so two requests
        cannot hand the same free address to two hosts.
        """
        if not locked:  # ``locked``: the caller took NAT_LOCK_KEY in this transaction already
            db.advisory_lock(s, NAT_LOCK_KEY)
        lookup = self._lookup if db.is_sqlite else self._lookup_pg
        if lookup is not None:  # the host's address, else the lowest free one: one statement
            found: str | None = rawsql.scalar(s, lookup, {"src": src_ip})
            return found
        nat_ip = s.scalar(_HOST_ADDRESS, {"src": src_ip})
        if nat_ip is None:
            nat_ip = allocate_nat(self.prefix, self.taken(s))
        return nat_ip


def _one_statement_lookup(addresses: list[str], as_values: bool = False, src_param: str = "src") -> Select:
    """``COALESCE(the host's live address, the lowest pool address no live lane holds)``: one
    round trip where there were two. COALESCE stops at its first non-null argument (SQLite and
    PostgreSQL), so a host that already has an address costs one index seek; otherwise each pool
    address is one indexed NOT EXISTS, as in ``taken``. The addresses come from ``ipaddress``,
    so inlining them as literals is safe. ``as_values`` (PostgreSQL): the pool as one ``VALUES``
    list instead of a UNION ALL of one-row SELECTs, which PostgreSQL re-plans at every request:
    0.54 -> 0.17 ms of planning for the campus /27 (EXPLAIN ANALYZE, docs/benchmarks.md). SQLite
    cannot name a VALUES subquery's columns, so it keeps the UNION ALL."""
    pool: Any
    if as_values:  # as text: a ``values()`` construct with literal rows has no cache key, so
        # SQLAlchemy would compile the whole statement again at every request (~0.5 ms of Python)
        rows_sql = ", ".join(f"('{a}', {i})" for i, a in enumerate(addresses))
        pool = (
            text(f"SELECT * FROM (VALUES {rows_sql}) AS v (address, rank)")
            .columns(column("address", String), column("rank", Integer))
            .subquery("pool")
        )
    else:
        rows: list[Select[Any]] = [
            select(
                literal_column(f"'{a}'").label("address"),  # type: ignore[misc]
                literal_column(str(i)).label("rank"),
            )
            for i, a in enumerate(addresses)
        ]
        pool = (union_all(*rows) if len(rows) > 1 else rows[0]).subquery("pool")
    free = (
        select(pool.c.address)
        .where(~exists().where(LANES.c.nat_ip == pool.c.address, LIVE))
        .order_by(pool.c.rank)
        .limit(1)
        .scalar_subquery()
    )
    return select(func.coalesce(_host_address(src_param).scalar_subquery(), free))
