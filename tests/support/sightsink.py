"""A SightingSink that records what it is offered: the acceptor's stand-in in detection tests."""

from __future__ import annotations

import threading

from viplanes.domain.sighting import Sighting


class RecordingSink:
    """Implements ``viplanes.domain.sighting.SightingSink``; thread-safe, ``wait_for`` for tests."""

    def __init__(self) -> None:
        self.sightings: list[Sighting] = []
        self._cond = threading.Condition()

    def offer(self, sighting: Sighting) -> None:
        with self._cond:
            self.sightings.append(sighting)
            self._cond.notify_all()

    def wait_for(self, dst_port: int, timeout: float) -> Sighting | None:
        """The first sighting of a flow to ``dst_port`` (or from it), waiting up to ``timeout`` s."""
        with self._cond:
            self._cond.wait_for(lambda: self.matching(dst_port) is not None, timeout=timeout)
            return self.matching(dst_port)

    def matching(self, port: int) -> Sighting | None:
        return next((s for s in self.sightings if port in (s.dst_port, s.src_port)), None)
