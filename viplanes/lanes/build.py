"""The one place that builds the lane service from the process's settings.

``serve``, ``api`` (through ``create_app``) and ``controller cluster`` all call
``build_lane_service``, so the DNS re-resolution window and the match limit
(``VIPLANES_DNS_TTL_*``, ``VIPLANES_MAX_LANE_MATCHES``) and the flow budgets are the same in every
process of a deployment; two hand-written constructions had drifted (issue 43).
"""

from __future__ import annotations

from collections.abc import Callable

from viplanes.config import AppConfig
from viplanes.controller.compile.budget import flow_costs_for
from viplanes.dataplane.base import Dataplane
from viplanes.lanes.manager import LaneManager
from viplanes.lanes.resolver import Resolver, default_resolver
from viplanes.lanes.targets import LaneLimits
from viplanes.store.db import Database
from viplanes.topologies.model import Topology


def _noop(*_args: object) -> None:
    return None


def lane_limits(config: AppConfig) -> LaneLimits:
    """The settings' match limit and DNS TTL window (a cap below the floor is raised to it)."""
    return LaneLimits(
        max_matches=config.max_lane_matches,
        ttl_floor_s=float(config.dns_ttl_floor_s),
        ttl_cap_s=float(max(config.dns_ttl_cap_s, config.dns_ttl_floor_s)),
    )


def build_lane_service(
    config: AppConfig,
    db: Database,
    dataplane: Dataplane,
    topology: Topology,
    clock: Callable[[], float],
    *,
    resolver: Resolver | None = None,
    on_decision: Callable[[str], None] = _noop,
    on_activation: Callable[[float, bool], None] = _noop,
) -> LaneManager:
    """The lane service of any process; the hooks feed the API's metrics where there are any."""
    return LaneManager(
        db,
        dataplane,
        topology,
        clock,
        on_decision=on_decision,
        on_activation=on_activation,
        resolver=resolver or default_resolver(config.dns_server),
        limits=lane_limits(config),
        flow_costs=flow_costs_for(topology),  # only when a switch has max_flows
    )
