"""What a lane costs in flow entries, per switch and table: the seam between the compiler, which
knows (``controller/compile/budget.py``), and the lane service, which refuses a lane that does
not fit (``viplanes/lanes/budgets.py``) but may not import the controller."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from viplanes.domain.values import LaneSpec

Slot = tuple[str, int]  # (switch name, table id)


@dataclass(frozen=True)
class FlowCost:
    """``own``: entries only this lane uses; ``shared``: entries keyed by the address that shares
    them among all live lanes of one host (ARP replies, ICMP-error plumbing), counted once."""

    own: Mapping[Slot, int] = field(default_factory=dict)
    shared: Mapping[str, Mapping[Slot, int]] = field(default_factory=dict)


class FlowCoster(Protocol):
    def base(self) -> Mapping[Slot, int]:
        """Entries every switch holds without any lane (guards, table-miss, conntrack plumbing)."""
        ...

    def lane(self, spec: LaneSpec) -> FlowCost:
        """The entries ``compile_lane`` and the shared flows give this lane; empty when it cannot
        be built (the activation then refuses it with its own reason)."""
        ...
