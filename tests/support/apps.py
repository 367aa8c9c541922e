"""The one way tests build the API's Flask app: the parts as ``viplanes/cli/services.py`` builds
them for a process (``app_parts``), then ``create_app`` around them, so no test builds a lane
service of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask

from viplanes.api.app import create_app, default_topology
from viplanes.cli.services import app_parts
from viplanes.config import AppConfig
from viplanes.dataplane.base import Dataplane
from viplanes.lanes.resolver import Resolver
from viplanes.topologies.model import Topology


def make_app(
    config: AppConfig | dict[str, Any] | None = None,
    dataplane: Dataplane | None = None,
    topology: Topology | None = None,
    clock: Callable[[], float] | None = None,
    resolver: Resolver | None = None,
) -> Flask:
    """An app on ``config`` (a dict of AppConfig fields is fine), by default on an in-memory data
    plane and the bundled campus."""
    if not isinstance(config, AppConfig):
        config = AppConfig(**(config or {}))
    if dataplane is None:
        from viplanes.dataplane.memory import MemoryDataplane

        dataplane = MemoryDataplane()
    return create_app(config, app_parts(config, dataplane, topology or default_topology(), clock, resolver))
