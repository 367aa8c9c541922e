"""The console's one door to controller facts: present only when the data plane is the
in-process OpenFlow controller (``viplanes serve``); the memory data plane has none."""

from __future__ import annotations

from typing import Any

from .web import ctx


def inspector() -> Any | None:
    plane = ctx().dataplane
    # only with a controller (os-ken is imported once, by the first page that asks)
    from viplanes.controller.runtime.inspect import ControllerInspector
    from viplanes.controller.runtime.lane_runtime import LaneRuntime

    if not isinstance(plane, LaneRuntime):
        return None
    return ControllerInspector(plane)
