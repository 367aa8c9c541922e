"""What the lane service's neighbours may ask of it: declared, so none of them holds the manager.

The DNS-name refresher (``names.py``) and automation (``viplanes.auto``) run beside the lane
service. Each takes a ``LaneDesk``: the service's ``LaneContext`` (read once, at construction,
into the fields it uses) and the few calls it makes. ``LaneManager`` satisfies it; a test may
pass anything that does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from viplanes.authz.tokens import Caller
from viplanes.lanes.context import LaneContext
from viplanes.lanes.requests import LaneTrigger
from viplanes.lanes.targets import LaneInput
from viplanes.store.models import Lane


class LaneDesk(Protocol):
    """The lane service as its neighbours see it."""

    @property
    def context(self) -> LaneContext: ...

    def request(
        self, caller: Caller, body: LaneInput, idempotency_key: str | None = None, trigger: LaneTrigger | None = None
    ) -> tuple[Lane, bool]:
        """Decide, store and (for an immediate lane) activate: ``LaneManager.request``."""
        ...

    def end(self, caller: Caller, lane_id: int, to: str) -> Lane:
        """Release or revoke a live lane: ``LaneManager.end``."""
        ...

    def revoke_lanes(self, lane_ids: Sequence[int]) -> None:
        """Take lanes whose committed rows ended off the switches."""
        ...
