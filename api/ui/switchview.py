"""The console's one door to controller facts: the data plane's declared ``switch_view``
(``viplanes.domain.inspection.SwitchView``), present only when the data plane is the in-process
OpenFlow controller (``viplanes serve``); the memory data plane has none."""

from __future__ import annotations

from viplanes.domain.inspection import SwitchView

from .web import ctx


def inspector() -> SwitchView | None:
    return ctx().dataplane.switch_view()
