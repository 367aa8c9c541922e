"""Detection from the switches as one part ``viplanes serve`` starts and stops: goflow2 supervised,
its reader thread, the detector, settings from ``VIPLANES_SFLOW_*`` (docs/configuration.md).

Off unless ``VIPLANES_SFLOW_ENABLED=1``. Enabled, it refuses to start without a prefilter: either
the caller's (``serve`` gives the acceptor's index of the grants that allow automatic lanes) or
``VIPLANES_SFLOW_PREFIXES``, so a switch's samples of the whole campus never become per-flow
state by default.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import ip_network
from pathlib import Path

from viplanes.detection.sflow.agents import SampleGuard
from viplanes.detection.sflow.detector import (
    Detector,
    DetectorSettings,
    DetectorStats,
    Prefilter,
    PrefixFilter,
    RateFloor,
    Sample,
)
from viplanes.detection.sflow.flowlabel import FlowLabelMarks
from viplanes.detection.sflow.gate import SflowGate
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED, CollectorProcess, CollectorSettings, free_udp_port
from viplanes.detection.sflow.seal import AgentSeal
from viplanes.domain.hostport import parse_hostport
from viplanes.domain.sighting import Sighting, SightingSink
from viplanes.settings import DEFAULTS, SettingError, Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SflowSettings:
    """Everything ``VIPLANES_SFLOW_*`` says; the defaults are safe (off, loopback)."""

    enabled: bool = DEFAULTS.flag("VIPLANES_SFLOW_ENABLED")
    listen: tuple[str, int] = parse_hostport(DEFAULTS.text("VIPLANES_SFLOW_LISTEN"))
    goflow2: Path = GOFLOW2_CACHED
    prefixes: tuple[str, ...] = ()
    detector: DetectorSettings = field(default_factory=DetectorSettings)

    @classmethod
    def from_settings(cls, s: Settings) -> SflowSettings:
        """The ``[sflow]`` settings; SettingError naming the variable on a bad prefix or address."""
        prefixes = tuple(p.strip() for p in s.text("VIPLANES_SFLOW_PREFIXES").split(",") if p.strip())
        for p in prefixes:
            try:
                ip_network(p, strict=False)
            except ValueError:
                raise SettingError("VIPLANES_SFLOW_PREFIXES", p, "IP prefixes separated by commas") from None
        listen_text = s.text("VIPLANES_SFLOW_LISTEN")
        try:
            listen = parse_hostport(listen_text)
        except ValueError:
            raise SettingError("VIPLANES_SFLOW_LISTEN", listen_text, "HOST:PORT") from None
        detector = DetectorSettings(
            threshold_bps=s.number("VIPLANES_SFLOW_THRESHOLD_MBPS") * 1e6,
            window_s=s.number("VIPLANES_SFLOW_WINDOW_S"),
            max_flows=s.integer("VIPLANES_SFLOW_MAX_FLOWS"),
        )
        return cls(
            enabled=s.flag("VIPLANES_SFLOW_ENABLED"),
            listen=listen,
            goflow2=Path(s.text("VIPLANES_SFLOW_GOFLOW2") or GOFLOW2_CACHED),
            prefixes=prefixes,
            detector=detector,
        )


class LogSink:
    """Logs each sighting: what serve offers until an acceptor is given (an operator sees which
    flows automation would consider, and nothing happens to them)."""

    def offer(self, sighting: Sighting) -> None:
        log.info(
            "sflow: %s %s:%s -> %s:%s proto %d at %.1f Mbit/s +-%.0f%% (agent %s)",
            sighting.kind,
            sighting.src_ip,
            sighting.src_port,
            sighting.dst_ip,
            sighting.dst_port,
            sighting.protocol,
            (sighting.rate_bps or 0) / 1e6,
            (sighting.rate_error or 0) * 100,
            sighting.reporter,
        )


class SflowDetection:
    """The running part: ``start`` launches goflow2 and the reader thread, ``stop`` ends both."""

    def __init__(
        self,
        settings: SflowSettings,
        sink: SightingSink,
        clock: Callable[[], float],
        prefilter: Prefilter | None = None,
        wrap: tuple[str, ...] = (),
        guard: SampleGuard | None = None,
        marks: FlowLabelMarks | None = None,
        floor: RateFloor | None = None,
    ) -> None:
        """``guard``: only the topology's sampling switches count (viplanes/detection/sflow/agents.py);
        then the gate listens on ``settings.listen`` and goflow2 on a loopback port behind it.
        ``marks``: admitted samples with a scitags flow label become sightings (flowlabel.py).
        ``floor``: each flow's own threshold above the settings' (the acceptor's grant rates)."""
        if prefilter is None:
            if not settings.prefixes:
                raise ValueError(
                    "sflow: no prefilter: set VIPLANES_SFLOW_PREFIXES to the sources and destinations "
                    "that automatic lanes may serve"
                )
            prefilter = PrefixFilter(settings.prefixes)
        self.settings = settings
        self.guard = guard
        self.marks = marks
        self._clock = clock
        self.detector = Detector(sink, prefilter, settings.detector, floor)
        # the gate seals what it forwards; the reader believes only sealed agents (seal.py)
        self.seal = AgentSeal(sw.agent for sw in guard.switches) if guard is not None else None
        self.gate = (
            SflowGate(guard, settings.listen, ("127.0.0.1", free_udp_port()), self.seal)
            if guard is not None and self.seal is not None
            else None
        )
        listen = self.gate.collector if self.gate is not None else settings.listen
        self.collector = CollectorProcess(
            self.detector,
            clock,
            CollectorSettings(binary=settings.goflow2, listen=listen, wrap=wrap),
            admit=self._admit if guard is not None or marks is not None else None,
        )

    def start(self) -> None:
        """Raises OSError when goflow2 cannot be started (missing binary: run scripts/setup.sh)."""
        if not self.settings.goflow2.exists() and not self.collector.settings.wrap:
            raise OSError(f"sflow: collector {self.settings.goflow2} not found (scripts/setup.sh builds it)")
        self.collector.start()
        if self.gate is not None:
            self.gate.start()
        host, port = self.settings.listen
        log.info(
            "sflow: collector listening on %s:%d, threshold %.0f Mbit/s",
            host,
            port,
            self.settings.detector.threshold_bps / 1e6,
        )

    def _admit(self, sample: Sample) -> Sample | None:
        """The reader's per-sample hook: the gate's seal, the sample check, then the flow label's
        mark. The sample with its switch's real agent, or None (refused, counted)."""
        if self.guard is not None and self.seal is not None:
            agent = self.seal.unseal(sample.agent)
            if agent is None:  # not forwarded by the gate: sent straight to goflow2's port
                self.guard.counts["sflow_ungated"] += 1
                return None
            sample = dataclasses.replace(sample, agent=agent)
            if not self.guard.sample(sample):
                return None
        if self.marks is not None:
            self.marks.observe(sample, self._clock())
        return sample

    def stats(self) -> DetectorStats:
        return self.detector.stats

    def stop(self) -> None:
        if self.gate is not None:
            self.gate.stop()
        self.collector.stop()
