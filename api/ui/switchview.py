"""The console's one door to controller facts: present only when the data plane is the
in-process OpenFlow controller (``viplanes serve``); the memory data plane has none."""

from __future__ import annotations

from typing import Any

from .web import ctx

_NEEDED = ("connected", "reconciled", "desired", "flow_stats", "reconcile_switch")


def inspector() -> Any | None:
    plane = ctx().dataplane
    if not all(hasattr(plane, a) for a in _NEEDED):
        return None
    from viplanes.controller.runtime.inspect import ControllerInspector  # only with a controller

    return ControllerInspector(plane)
