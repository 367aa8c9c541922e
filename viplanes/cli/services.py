"""The one place that builds each process's parts from its settings: ``serve``, the ``api``
workers and ``controller cluster`` call these, so the lane limits, retention, automation and
sFlow settings are the same in every process of a deployment (issue 43: two hand-built lane
services had drifted). Each part receives its typed sub-settings; nothing here reads the
environment itself (viplanes/cli/settingsload.py does, once per command)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from viplanes.cli.settingsload import bad_setting, process_settings
from viplanes.config import AppConfig, ct_zone_base
from viplanes.settings import Settings

if TYPE_CHECKING:  # imported where built: a command that needs none of them loads none
    from viplanes.api.app import AppParts
    from viplanes.auto.service import AutoSettings
    from viplanes.dataplane.base import Dataplane
    from viplanes.detection.sflow.service import SflowSettings
    from viplanes.lanes.resolver import Resolver
    from viplanes.store.retention import RetentionConfig
    from viplanes.topologies.model import Topology


@dataclass(frozen=True)
class ProcessSettings:
    """One process's typed settings, each part's slice built once from the one :class:`Settings`."""

    env: Settings
    app: AppConfig  # the lane limits, DNS, auth budgets, console and (API processes) OIDC
    retention: RetentionConfig
    auto: AutoSettings
    sflow: SflowSettings
    learn_features: bool
    ct_zone_base: int | None


def load(db_url: str = "", *, api: bool = True, migrate: bool = False, env: Settings | None = None) -> ProcessSettings:
    """The settings of a process; ``api=False`` (a controller) does not read OIDC. A bad value is
    one line and exit 78 (BadSetting)."""
    from viplanes.auto.service import AutoSettings
    from viplanes.detection.sflow.service import SflowSettings
    from viplanes.store.retention import RetentionConfig

    env = env or process_settings()
    try:
        return ProcessSettings(
            env=env,
            app=AppConfig.from_settings(env, oidc=api, db_url=db_url, migrate=migrate),
            retention=RetentionConfig.from_settings(env),
            auto=AutoSettings.from_settings(env),
            sflow=SflowSettings.from_settings(env),
            learn_features=env.flag("VIPLANES_LEARN_SWITCH_FEATURES"),
            ct_zone_base=ct_zone_base(env),
        )
    except ValueError as exc:  # SettingError, or a part's own check (OIDC's issuer and audience)
        raise bad_setting(exc) from None


def lane_service(ps: ProcessSettings, db: Any, plane: Any, topology: Any, clock: Callable[[], float]) -> Any:
    """A controller's lane service (no API metrics): the same builder as the API's."""
    from viplanes.lanes.build import build_lane_service

    return build_lane_service(ps.app, db, plane, topology, clock)


def app_parts(
    config: AppConfig,
    plane: Dataplane,
    topology: Topology,
    clock: Callable[[], float] | None = None,
    resolver: Resolver | None = None,
) -> AppParts:
    """The API process's lane service (lanes/build.py, as every process's) wired to its metrics;
    ``resolver``: a test's own DNS answers (default: the system's)."""
    from viplanes.api.app import AppParts
    from viplanes.api.metrics import Metrics
    from viplanes.domain.clock import SteadyClock
    from viplanes.lanes.build import build_lane_service
    from viplanes.store.db import Database

    clock = clock or SteadyClock()  # lane windows: viplanes/domain/clock.py
    db = Database(config.resolved_db_url(), pool_size=config.db_pool_size)
    if config.migrate:
        db.create_all()
    m = Metrics()
    manager = build_lane_service(
        config, db, plane, topology, clock, resolver=resolver, on_decision=m.decision, on_activation=m.activation
    )
    return AppParts(db, manager, m, plane, topology, clock)


def app(ps: ProcessSettings, plane: Any, topology: Any, clock: Callable[[], float] | None = None) -> Any:
    """The API's Flask app around the parts built here (``create_app`` builds none)."""
    from viplanes.api.app import create_app

    return create_app(ps.app, app_parts(ps.app, plane, topology, clock))


def retention_runner(ps: ProcessSettings, db: Any) -> Any:
    """Ended lanes and audit events pruned (exported first) every hour; VIPLANES_*RETENTION*."""
    from viplanes.store.retention import RetentionError, RetentionRunner

    try:
        return RetentionRunner(db, ps.retention)
    except RetentionError as exc:
        raise click.ClickException(f"retention: {exc}") from None


def automation(ps: ProcessSettings, manager: Any, clock: Callable[[], float]) -> Any:
    """Automatic lanes in serve (viplanes/auto): acceptor, idle ends, the firefly listener."""
    from viplanes.auto.service import Automation

    try:
        return Automation(manager, ps.auto, clock)
    except OSError as exc:
        raise click.ClickException(f"firefly listener: {exc.strerror or exc}") from None


def automation_role(ps: ProcessSettings, manager: Any, topology: Any, clock: Callable[[], float]) -> Any:
    """Automatic lanes on a cluster's master (viplanes/auto/role.py), with serve's settings."""
    from viplanes.auto.role import AutomationRole

    try:
        return AutomationRole(manager, topology, clock, ps.auto, ps.sflow)
    except OSError as exc:
        raise click.ClickException(str(exc)) from None


def sflow_detection(ps: ProcessSettings, clock: Callable[[], float], acceptor: Any, topology: Any) -> Any:
    """Detection from the switches (VIPLANES_SFLOW_*; off by default): viplanes/auto/sflowwire.py."""
    from viplanes.auto.sflowwire import sflow_detection as build

    try:
        return build(acceptor, topology, clock, ps.sflow)
    except ValueError as exc:
        raise bad_setting(exc) from None
    except OSError as exc:  # the gate could not bind VIPLANES_SFLOW_LISTEN
        raise click.ClickException(f"sflow: cannot listen: {exc.strerror or exc}") from None


def with_zone_base(ps: ProcessSettings, topology: Any) -> Any:
    """The topology with the deployment's conntrack zone base when the setting gives one
    (``VIPLANES_CT_ZONE_BASE``): several deployments of one topology file on one vswitchd (a lab,
    a test, a second controller) keep their zones apart. ValueError when the zones would not fit."""
    from viplanes.topologies.model import with_ct_zone_base

    return topology if ps.ct_zone_base is None else with_ct_zone_base(topology, ps.ct_zone_base)
