"""What every view reaches through ``current_app.extensions["viplanes"]``, declared and typed.

``create_app`` (``app.py``) builds one ``AppContext``; views call ``app_context()`` instead of
reading the extension as ``Any``, so the type checker sees every member they use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import current_app

from viplanes.config import AppConfig
from viplanes.dataplane.base import Dataplane
from viplanes.lanes.manager import LaneManager
from viplanes.store.db import Database
from viplanes.store.ratelimit import FailedAuthLimiter
from viplanes.topologies.model import Topology

from .metrics import Metrics
from .oidc import OidcAuth


@dataclass
class AppContext:
    """What views reach through ``current_app.extensions["viplanes"]``."""

    config: AppConfig
    db: Database
    manager: LaneManager
    topology: Topology
    dataplane: Dataplane
    clock: Callable[[], float]
    limiter: FailedAuthLimiter
    metrics: Metrics
    oidc: OidcAuth | None = None  # the campus provider's tokens (issue 30), when configured


def app_context() -> AppContext:
    """The running app's context (inside a request or an app context)."""
    ctx = current_app.extensions["viplanes"]
    assert isinstance(ctx, AppContext)
    return ctx
