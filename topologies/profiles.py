"""What a switch can hold: its capability profile, feature overrides and flow-table budget.

Campuses run hardware switches that lack what Open vSwitch gives every lane (connection tracking,
recirculation to other tables, meters, masked port matches) and hold a few hundred to a few
thousand entries. A switch names a ``profile:`` (one of ``PROFILES``), may override single
``features:`` and may declare ``max_flows:`` (a total, or ``{total: N, tables: {0: M}}``). The
default is ``ovs`` without a limit: a topology without these keys behaves as before. The lane
service refuses a lane that does not fit (``viplanes/lanes/budgets.py``); ``viplanes topology
check`` refuses a topology whose lanes need a feature no switch on their path has
(``lane_problems``). docs/hardware.md holds the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

FEATURES = ("conntrack", "nat", "meters", "multi_table", "masked_ports", "set_field", "ipv6", "fast_failover")
TABLE_MAX = 254  # OpenFlow 1.3 table ids 0..254
FLOWS_MAX = 2**31 - 1


@dataclass(frozen=True)
class Features:
    """One flag per feature a lane may need (docs/hardware.md says which lane needs which)."""

    conntrack: bool = True
    nat: bool = True
    meters: bool = True
    multi_table: bool = True
    masked_ports: bool = True
    set_field: bool = True
    ipv6: bool = True
    # OpenFlow 1.3 fast-failover groups (OFPGT_FF): the switch moves a lane to its backup port
    # itself when the watched port goes down (controller/compile/failover.py)
    fast_failover: bool = True

    def missing(self) -> tuple[str, ...]:
        return tuple(name for name in FEATURES if not getattr(self, name))


PROFILES: dict[str, Features] = {
    "ovs": Features(),
    # a merchant-silicon ACL table: one table, no state, no meters; NAT by set_field still works
    # and no group table, so no fast failover (the controller re-routes)
    "single_table": Features(conntrack=False, meters=False, multi_table=False, fast_failover=False),
    # a multi-table OpenFlow 1.3 pipeline (OF-DPA-like) without connection tracking
    "multi_table": Features(conntrack=False),
}


@dataclass(frozen=True)
class FlowLimit:
    """``max_flows``: entries the switch holds in total and per table (None: no limit given)."""

    total: int | None = None
    tables: tuple[tuple[int, int], ...] = ()  # (table id, entries), sorted

    @property
    def limited(self) -> bool:
        return self.total is not None or bool(self.tables)


@dataclass(frozen=True)
class Capabilities:
    profile: str = "ovs"
    features: Features = Features()
    max_flows: FlowLimit = FlowLimit()
