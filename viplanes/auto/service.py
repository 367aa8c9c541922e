"""Automatic lanes in a running server: the acceptor, the idle ender and (if enabled) the firefly
listener, with their settings read from the environment (docs/configuration.md, ``[auto]``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from viplanes.auto.acceptor import Acceptor
from viplanes.auto.ender import IdleEnder
from viplanes.auto.firefly import FireflyListener
from viplanes.lanes.desk import LaneDesk


class SettingError(ValueError):
    pass


def _env(name: str, default: str, kind: type) -> float:
    raw = os.environ.get(name, default)
    try:
        value = kind(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not a number") from None
    if value < 0:
        raise SettingError(f"{name} must not be negative")
    return float(value)


def _flag(name: str, default: str) -> bool:
    raw = os.environ.get(name, default).strip().lower()
    if raw not in ("0", "1", "true", "false", "yes", "no", "on", "off"):
        raise SettingError(f"{name}={raw!r}: use 1 or 0")
    return raw in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class AutoSettings:
    firefly_port: int = 0  # 0: no listener (the safe default); scitags uses 10514
    firefly_host: str = "0.0.0.0"
    queue_size: int = 256
    firefly_rate: float = 5.0  # per source address, per second (burst 2x)
    idle_check_s: float = 1.0
    # how long the two watch flows count before a running NAT'd connection is taken over: longer
    # than the switches' counter refresh (OVS: 0.5 s), or the counts lag (natmap.MIN_PACKETS)
    nat_watch_s: float = 0.8
    nat_takeover: bool = True  # take over running NAT'd connections (False: refuse them, nat_in_flight)
    # how long a NAT'd flow's sighting with no post-NAT pair yet waits for one (0: judged at once);
    # at most the pairing's window (natmap.WINDOW_S), past which no pair could be found anyway
    nat_hold_s: float = 0.5

    @classmethod
    def from_env(cls) -> AutoSettings:
        port = int(_env("VIPLANES_FIREFLY_PORT", "0", int))
        if port > 65535:
            raise SettingError("VIPLANES_FIREFLY_PORT must be 0-65535")
        return cls(
            firefly_port=port,
            firefly_host=os.environ.get("VIPLANES_FIREFLY_HOST", "0.0.0.0"),
            queue_size=max(1, int(_env("VIPLANES_AUTO_QUEUE", "256", int))),
            firefly_rate=_env("VIPLANES_FIREFLY_RATE", "5", float),
            idle_check_s=max(0.1, _env("VIPLANES_AUTO_IDLE_CHECK_S", "1", float)),
            nat_watch_s=min(2.0, max(0.1, _env("VIPLANES_AUTO_NAT_WATCH_S", "0.8", float))),
            nat_takeover=_flag("VIPLANES_AUTO_NAT_TAKEOVER", "1"),
            nat_hold_s=min(2.0, _env("VIPLANES_AUTO_NAT_HOLD_S", "0.5", float)),
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
