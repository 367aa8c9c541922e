"""Detection with the agent checks and the flow-label marks, run for a while inside a network
namespace (``python -m tests.support.sflowrun FACTS_JSON SECONDS``): the gate on 127.0.0.1:6343,
goflow2 behind it; prints ``ready`` once goflow2 listens, runs until its stdin closes (at most
SECONDS), drains (until neither the gate nor goflow2 has had anything new for 1 s), then prints one
JSON object: the sightings, the refusals and the sources the gate saw. A fixed run time lost a
burst that reached the gate just before the end on a loaded CI machine.

FACTS_JSON: {"agent": A, "sources": [..], "hosts": {ifindex: [addresses]}, "experiments": [..]}.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from ipaddress import ip_address

from viplanes.detection.sflow.agents import SampleGuard, SamplingSwitch
from viplanes.detection.sflow.flowlabel import FlowLabelMarks
from viplanes.detection.sflow.service import SflowDetection, SflowSettings
from viplanes.domain.sighting import Sighting


class Printer:
    def __init__(self) -> None:
        self.seen: list[dict] = []

    def offer(self, s: Sighting) -> None:
        self.seen.append({"kind": str(s.kind), "src": str(s.src_ip), "dport": s.dst_port, **s.evidence})


class SeenGuard(SampleGuard):
    """Records each datagram's UDP source, admitted or not (what the switch really sends from)."""

    def __init__(self, switches: list[SamplingSwitch]) -> None:
        super().__init__(switches)
        self.sources: Counter[str] = Counter()

    def datagram(self, source, payload):  # type: ignore[no-untyped-def]
        self.sources[str(source)] += 1
        return super().datagram(source, payload)


def drain(det: SflowDetection, guard: SeenGuard, quiet_s: float = 1.0, most_s: float = 10.0) -> None:
    """Wait until the gate and goflow2's output have been still for ``quiet_s``."""
    end = time.monotonic() + most_s
    last, still_since = (-1, -1), time.monotonic()
    while time.monotonic() < end:
        now = (sum(guard.sources.values()), det.collector.lines)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            return
        time.sleep(0.05)


def main() -> None:
    facts, seconds = json.loads(sys.argv[1]), float(sys.argv[2])
    ports = {int(k): frozenset(ip_address(a) for a in v) for k, v in facts["hosts"].items()}
    switch = SamplingSwitch(
        "br0",
        ip_address(facts["agent"]),
        frozenset(ip_address(a) for a in facts["sources"]),
        frozenset(a for v in ports.values() for a in v),
        ports,
    )
    guard = SeenGuard([switch])
    sink = Printer()
    marks = FlowLabelMarks(sink, facts["experiments"], lambda _s, _d: True)
    settings = SflowSettings(enabled=True, listen=("127.0.0.1", 6343))
    det = SflowDetection(settings, sink, time.monotonic, prefilter=lambda _s, _d: True, guard=guard, marks=marks)
    det.start()
    print("ready", flush=True)
    ended = threading.Thread(target=sys.stdin.read, daemon=True)
    ended.start()
    ended.join(seconds)
    drain(det, guard)
    det.stop()
    out = {"sightings": sink.seen, "refused": dict(guard.counts), "marks": dict(marks.counts)}
    print(json.dumps({**out, "sources": dict(guard.sources)}), flush=True)


if __name__ == "__main__":
    main()
