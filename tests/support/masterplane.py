"""A master controller's data plane without switches, for the split deployment's node tests."""

from __future__ import annotations

from typing import Any

from viplanes.dataplane.memory import MemoryDataplane


class MasterPlane(MemoryDataplane):
    """What the node needs of its plane (``EmbeddedController``: the carried lanes, batch
    removals) and of its roles (``RoleController``: master, the epoch): one double for both."""

    is_master = True
    epoch = 0
    on_deposed: Any = None

    def all_lane_counters(self) -> dict[int, Any]:
        return {}

    @property
    def lanes(self) -> dict[int, Any]:
        return self.active

    def queue_removals(self, lane_ids: Any) -> None:
        for lane_id in lane_ids:
            self.deactivate(lane_id)

    def deactivate_many(self, lane_ids: list[int], timeout_s: float = 5.0) -> str | None:
        for lane_id in lane_ids:
            self.deactivate(lane_id)
        return None

    def set_role(self, master: bool, epoch: int) -> None:
        return None

    def gate_writes(self, lease_valid: Any) -> None:
        """The node hands over its lease check; nothing here writes to a switch."""
        return None
