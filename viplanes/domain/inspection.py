"""What the operator console may ask of live switches, declared (issue 43).

The console's switch, lane-flow and drift pages read a ``SwitchView``; the data plane offers one
(``Dataplane.switch_view``) or None (the memory plane, the split deployment's API process). The
in-process controller's is ``controller/runtime/inspect.py:ControllerInspector``. The console
never asks which class its data plane is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class SwitchRow:
    """One switch as the console lists it."""

    dpid: int
    name: str
    role: str  # the switch's place in the campus (access, core, border, ...)
    of_role: str  # our OpenFlow controller role on it
    connected: bool
    app_flows: int | None  # None: not connected or no answer
    last_reconcile: str  # "kept 4, added 0, deleted 0, refreshed 0" or "never"


@dataclass(frozen=True)
class FlowFact:
    priority: int
    match: str
    packets: int
    bytes: int
    hard_timeout: int
    age_s: int


@dataclass
class DriftReport:
    """Per switch: lanes whose flows differ from what the database wants, and flows of no lane."""

    lanes: dict[int, list[str]] = field(default_factory=dict)  # lane id -> ["s1: 2 missing", ...]
    orphans: list[str] = field(default_factory=list)  # "s2: 3 flows of lane 17 (not live)"
    base: list[str] = field(default_factory=list)  # table-miss / bypass-drop differences
    unreadable: list[str] = field(default_factory=list)  # switches that did not answer

    @property
    def clean(self) -> bool:
        return not (self.lanes or self.orphans or self.base or self.unreadable)


class SwitchView(Protocol):
    """Read-only facts about the live switches, plus the controller's own reconcile."""

    def switches(self) -> list[SwitchRow]:
        """Every known or connected switch, with its flow count and last reconcile."""
        ...

    def lane_flows(self, lane_id: int) -> dict[str, list[FlowFact] | None]:
        """Switch name -> the lane's flows as that switch reports them (None: no answer)."""
        ...

    def drift(self) -> DriftReport:
        """Where the switches differ from the database."""
        ...

    def reconcile_now(self) -> list[str]:
        """Run the controller's reconcile on every connected switch; one line per switch."""
        ...
