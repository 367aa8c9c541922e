"""The Flask app factory: one app = one database, one data plane, one topology, one clock."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flask import Flask

from viplanes.authz.tokencache import TOKENS
from viplanes.config import AppConfig
from viplanes.dataplane.base import Dataplane
from viplanes.lanes.manager import LaneManager
from viplanes.store.db import Database
from viplanes.store.ratelimit import Budgets, FailedAuthLimiter
from viplanes.topologies.capfacts import fact_rows
from viplanes.topologies.model import Topology

from . import audit, auth, automation, bodies, errors, grants, health, lanes, metrics, principals, requestid
from .context import AppContext
from .oidc import OidcAuth

log = logging.getLogger(__name__)


def default_topology() -> Topology:
    import viplanes.topologies as pkg
    from viplanes.topologies.loader import load_topology

    return load_topology(Path(pkg.__file__).resolve().parent / "campus.yaml")


@dataclass(frozen=True)
class AppParts:
    """What the API serves, built before the app by the process's builder
    (``viplanes/cli/services.py:app_parts``): the database, the lane service and its metrics, on
    the data plane, topology and clock the lane service was built with."""

    db: Database
    manager: LaneManager
    metrics: metrics.Metrics
    dataplane: Dataplane
    topology: Topology
    clock: Callable[[], float]


def create_app(config: AppConfig, parts: AppParts) -> Flask:
    """The app around ``parts``: it builds no lane service of its own, so every process serves
    the one ``viplanes/cli/services.py`` built (tests too: ``tests/support/apps.py``)."""
    db, manager, m, clock = parts.db, parts.manager, parts.metrics, parts.clock
    dataplane, topology = parts.dataplane, parts.topology
    TOKENS.ttl_s = config.token_cache_ttl_s  # one cache per process (authz/tokencache.py)
    m.watch_lanes(manager.counts_by_state)
    if manager.flow_costs is not None:
        m.watch_budgets(manager.flow_budgets)
    m.watch_switch_facts(lambda: fact_rows(topology, dataplane.switch_facts()))  # learned from the switches
    m.watch_links(dataplane)  # viplanes_link_up, re-route counts and durations

    app = Flask("viplanes")
    app.config.update(
        API_TITLE="VIP Lanes",
        API_VERSION="v1",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/api/v1",
        OPENAPI_JSON_PATH="openapi.json",
        MAX_CONTENT_LENGTH=64 * 1024,
        JSON_SORT_KEYS=False,
        API_SPEC_OPTIONS={
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
            "security": [{"bearer": []}],
            "info": {"description": "Operators grant; researchers request middlebox-free lanes."},
        },
    )
    app.extensions["viplanes"] = AppContext(
        config,
        db,
        manager,
        topology,
        dataplane,
        clock,
        FailedAuthLimiter(
            db,
            Budgets(
                config.auth_max_failures,
                config.auth_net_max_failures,
                config.auth_global_max_failures,
                config.auth_window_s,
            ),
            clock,
        ),
        m,
        OidcAuth(config.oidc, on_lanes_ended=manager.revoke_lanes) if config.oidc is not None else None,
    )
    requestid.register(app)  # first hook: every answer and log line of a request carries its id
    api = errors.VipApi(app)
    for bp in (lanes.bp, grants.bp, principals.bp, audit.bp, automation.bp):
        api.register_blueprint(bp)
    app.register_blueprint(metrics.bp)
    app.register_blueprint(health.bp)
    from . import ui  # the operator console under /ui/ (server-rendered pages, same authz)

    ui.register(app)
    errors.register(app)
    auth.register(app)
    requestid.register_principal(app)
    bodies.register(app)  # after auth: bodies of unauthenticated requests are never parsed
    return app
