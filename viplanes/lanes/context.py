"""What every part of the lane service is handed at construction: the declared context.

``LaneManager`` builds one ``LaneContext`` and passes it to its collaborators (``LaneReads``,
``LaneActivation``) and, through ``LaneManager.context``, to the DNS-name refresher and the
automation acceptor. Each part takes exactly this, never a back-reference to the manager, so
no part reaches through another for a name it was not given (issue 43).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from viplanes.dataplane.base import Dataplane
from viplanes.domain.flowcost import FlowCoster
from viplanes.lanes.pool import LanePool
from viplanes.lanes.resolver import Resolver
from viplanes.lanes.targets import LaneLimits
from viplanes.store.db import Database
from viplanes.topologies.model import Topology


@dataclass(frozen=True)
class LaneContext:
    """The lane service's fixed collaborators, shared by its parts."""

    db: Database
    dataplane: Dataplane
    topology: Topology
    # lane windows are judged on a clock a wall-clock step cannot move (viplanes/domain/clock.py)
    clock: Callable[[], float]
    limits: LaneLimits
    resolver: Resolver
    lane_pool: LanePool
    # the compiler's flow counts (controller/compile/budget.py), for switches with max_flows
    flow_costs: FlowCoster | None = None
    # an extension and a re-resolved name re-send one lane at a time
    resend_lock: threading.Lock = field(default_factory=threading.Lock)


class Claims:
    """Lanes a thread of this process is activating now (so ``recover`` and ``tick`` skip them)."""

    def __init__(self) -> None:
        self._ids: set[int] = set()
        self._lock = threading.Lock()

    def claim(self, lane_id: int) -> bool:
        """Mark a lane as being activated by this thread; False if another thread already is."""
        with self._lock:
            if lane_id in self._ids:
                return False
            self._ids.add(lane_id)
            return True

    def release(self, lane_id: int) -> None:
        with self._lock:
            self._ids.discard(lane_id)

    def __contains__(self, lane_id: object) -> bool:
        with self._lock:
            return lane_id in self._ids
