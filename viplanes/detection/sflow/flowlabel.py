"""The IPv6 flow label as a scitags mark: a sampled packet whose label carries an experiment the
campus marks (topology ``ipv6_flow_label``) becomes a ``Sighting(kind=FLOW_LABEL)`` at its first
sample, with no rate threshold, as a firefly ``start`` would (docs/automatic-lanes.md).

The scitags packet-marking layout of the 20-bit label, most significant bit first (as flowd's
eBPF backend writes it): 2 entropy bits, the experiment id in 9 bits *least significant bit
first*, 1 entropy bit, the activity id in 6 bits, 2 entropy bits. The entropy bits are random;
they keep the label usable for ECMP hashing (RFC 6437).

A host's kernel labels its IPv6 flows at random by default (Linux ``auto_flowlabels``), so a label
is a mark only for the experiments the campus names: a random label hits one named experiment
with probability 1/511. What a mark may do is what a firefly may: ask for a lane its grant
already allows with scitags marks (``fireflies``), for exactly the sampled 5-tuple. The sample
check (agents.py) has already tied the packet to its source host's switch port.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from viplanes.detection.sflow.detector import Prefilter, Sample
from viplanes.domain.sighting import Sighting, SightingKind, SightingSink, SightingState

LABEL_BITS = 20
EXPERIMENT_BITS, ACTIVITY_BITS = 9, 6
_EXP_SHIFT, _ACT_SHIFT = 9, 2  # the fields' lowest bit positions in the label
REMEMBER_S = 2.0  # a marked flow offered once is not offered again for this long
REMEMBER_MAX = 4096
MARKED_PROTOCOLS = (6, 17)


def _reverse(value: int, bits: int) -> int:
    out = 0
    for _ in range(bits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def encode(experiment: int, activity: int, entropy: int = 0) -> int:
    """The label for ``experiment`` (0-511) and ``activity`` (0-63); ``entropy`` (5 bits) fills
    the random bits, high to low: 2 at the top, 1 in the middle, 2 at the bottom."""
    if not 0 <= experiment < 1 << EXPERIMENT_BITS or not 0 <= activity < 1 << ACTIVITY_BITS:
        raise ValueError(f"scitags: experiment 0-511 and activity 0-63, got {experiment}, {activity}")
    if not 0 <= entropy < 32:
        raise ValueError("scitags: 5 entropy bits")
    top, middle, bottom = entropy >> 3, (entropy >> 2) & 1, entropy & 3
    label = top << 18 | _reverse(experiment, EXPERIMENT_BITS) << _EXP_SHIFT | middle << 8
    return label | activity << _ACT_SHIFT | bottom


def decode(label: int) -> tuple[int, int]:
    """(experiment, activity) of a 20-bit flow label; ValueError for anything wider."""
    if not 0 <= label < 1 << LABEL_BITS:
        raise ValueError(f"not a 20-bit flow label: {label}")
    experiment = _reverse((label >> _EXP_SHIFT) & ((1 << EXPERIMENT_BITS) - 1), EXPERIMENT_BITS)
    return experiment, (label >> _ACT_SHIFT) & ((1 << ACTIVITY_BITS) - 1)


class FlowLabelMarks:
    """Feed ``observe`` with admitted samples; a marked flow's first sample goes to ``sink`` as a
    ``FLOW_LABEL`` start. Cheap for everything else: no label, another experiment, outside the
    prefilter (no automation-enabled grant could hold it) cost a counter and no state."""

    def __init__(self, sink: SightingSink, experiments: Iterable[int], prefilter: Prefilter) -> None:
        self._sink = sink
        self.experiments = frozenset(experiments)
        self._prefilter = prefilter
        self._offered: dict[tuple[object, ...], float] = {}
        self.counts: Counter[str] = Counter()

    def observe(self, sample: Sample, now: float) -> Sighting | None:
        label = sample.flow_label
        if not label or sample.src_ip.version != 6 or sample.protocol not in MARKED_PROTOCOLS:
            return None
        try:
            experiment, activity = decode(label)
        except ValueError:
            self.counts["flow_label_malformed"] += 1
            return None
        if experiment not in self.experiments:
            self.counts["flow_label_other"] += 1  # random (RFC 6437) or another campus's mark
            return None
        if not self._prefilter(sample.src_ip, sample.dst_ip):
            self.counts["flow_label_filtered"] += 1
            return None
        key = (sample.src_ip, sample.dst_ip, sample.protocol, sample.src_port, sample.dst_port)
        if self._offered.get(key, -1e18) > now - REMEMBER_S:
            return None
        if len(self._offered) >= REMEMBER_MAX:
            self._offered.clear()
        self._offered[key] = now
        sighting = Sighting(
            kind=SightingKind.FLOW_LABEL,
            state=SightingState.START,
            src_ip=sample.src_ip,
            dst_ip=sample.dst_ip,
            protocol=sample.protocol,
            src_port=sample.src_port,
            dst_port=sample.dst_port,
            observed_at=now,
            reporter=sample.agent,
            evidence={"experiment": str(experiment), "activity": str(activity), "flow_label": f"0x{label:05x}"},
        )
        self.counts["flow_label_marks"] += 1
        self._sink.offer(sighting)
        return sighting
