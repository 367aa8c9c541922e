"""Automatic lanes in a running server: the acceptor, the idle ender and (if enabled) the firefly
listener, with their ``[auto]`` settings (viplanes/settings/table.py, docs/configuration.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from viplanes.auto.acceptor import Acceptor
from viplanes.auto.ender import IdleEnder
from viplanes.detection.firefly import FireflyListener
from viplanes.lanes.desk import LaneDesk
from viplanes.settings import DEFAULTS, SettingError, Settings

__all__ = ["AutoSettings", "Automation", "SettingError"]


@dataclass(frozen=True)
class AutoSettings:
    firefly_port: int = DEFAULTS.integer("VIPLANES_FIREFLY_PORT")  # 0: no listener; scitags uses 10514
    firefly_host: str = DEFAULTS.text("VIPLANES_FIREFLY_HOST")
    queue_size: int = DEFAULTS.integer("VIPLANES_AUTO_QUEUE")
    firefly_rate: float = DEFAULTS.number("VIPLANES_FIREFLY_RATE")  # per source address, per second (burst 2x)
    idle_check_s: float = DEFAULTS.number("VIPLANES_AUTO_IDLE_CHECK_S")
    # how long the two watch flows count before a running NAT'd connection is taken over: longer
    # than the switches' counter refresh (OVS: 0.5 s), or the counts lag (natproof.MIN_PACKETS)
    nat_watch_s: float = DEFAULTS.number("VIPLANES_AUTO_NAT_WATCH_S")
    # take over running NAT'd connections (False: refuse them, nat_in_flight)
    nat_takeover: bool = DEFAULTS.flag("VIPLANES_AUTO_NAT_TAKEOVER")
    # how long a NAT'd flow's sighting with no post-NAT pair yet waits for one (0: judged at once);
    # at most the pairing's window (natmap.WINDOW_S), past which no pair could be found anyway
    nat_hold_s: float = DEFAULTS.number("VIPLANES_AUTO_NAT_HOLD_S")

    @classmethod
    def from_settings(cls, s: Settings) -> AutoSettings:
        """The ``[auto]`` settings, clamped where a value past a bound would only misbehave."""
        return cls(
            firefly_port=s.integer("VIPLANES_FIREFLY_PORT"),
            firefly_host=s.text("VIPLANES_FIREFLY_HOST"),
            queue_size=max(1, s.integer("VIPLANES_AUTO_QUEUE")),
            firefly_rate=s.number("VIPLANES_FIREFLY_RATE"),
            idle_check_s=max(0.1, s.number("VIPLANES_AUTO_IDLE_CHECK_S")),
            nat_watch_s=min(2.0, max(0.1, s.number("VIPLANES_AUTO_NAT_WATCH_S"))),
            nat_takeover=s.flag("VIPLANES_AUTO_NAT_TAKEOVER"),
            nat_hold_s=min(2.0, s.number("VIPLANES_AUTO_NAT_HOLD_S")),
        )


class Automation:
    """What `viplanes serve` starts; ``acceptor`` is the ``SightingSink`` detectors are given."""

    def __init__(self, manager: LaneDesk, settings: AutoSettings, clock: Callable[[], float]) -> None:
        self.acceptor = Acceptor(
            manager,
            settings.queue_size,
            firefly_rate=settings.firefly_rate,
            firefly_burst=2 * settings.firefly_rate,
            watch_s=settings.nat_watch_s,
            nat_takeover=settings.nat_takeover,
            nat_hold_s=settings.nat_hold_s,
            nat_hold_max=settings.queue_size,  # a release never brings back more than the queue takes
        )
        self.ender = IdleEnder(manager, settings.idle_check_s)
        self.listener = (
            FireflyListener(self.acceptor, settings.firefly_host, settings.firefly_port, clock)
            if settings.firefly_port
            else None
        )

    def start(self) -> None:
        self.acceptor.start()
        self.ender.start()
        if self.listener is not None:
            self.listener.start()

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
        self.ender.stop()
        self.acceptor.stop()
