"""The scitags mark in the IPv6 flow label: the decoder against the packet-marking layout (as
flowd's eBPF backend builds it, bit string by bit string), and the first sample of a marked flow
becoming a ``FLOW_LABEL`` sighting while unmarked, foreign and repeated samples do not."""

from __future__ import annotations

import json
from ipaddress import ip_address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.sightsink import RecordingSink
from viplanes.detection.sflow.detector import Sample
from viplanes.detection.sflow.flowlabel import FlowLabelMarks, decode, encode
from viplanes.detection.sflow.goflow import parse_line
from viplanes.domain.sighting import SightingKind, SightingState

DTN6, CLOUD6 = "2001:db8:3::30", "2001:db8:ff::10"


def layout(experiment: int, activity: int, r1: int, r2: int, r3: int) -> int:
    """The label as the marking specification spells it: 2 random bits, the experiment's 9 bits
    least significant first, 1 random bit, the activity's 6 bits, 2 random bits."""
    bits = f"{r1:02b}" + f"{experiment:09b}"[::-1] + f"{r2:01b}" + f"{activity:06b}" + f"{r3:02b}"
    return int(bits, 2)


experiments = st.integers(0, 511)
activities = st.integers(0, 63)


@given(experiments, activities, st.integers(0, 31))
def test_round_trip(experiment: int, activity: int, entropy: int) -> None:
    label = encode(experiment, activity, entropy)
    assert 0 <= label < 1 << 20
    assert decode(label) == (experiment, activity)


@given(experiments, activities, st.integers(0, 3), st.integers(0, 1), st.integers(0, 3))
def test_the_specs_layout_decodes(experiment: int, activity: int, r1: int, r2: int, r3: int) -> None:
    label = layout(experiment, activity, r1, r2, r3)
    assert decode(label) == (experiment, activity)
    assert encode(experiment, activity, r1 << 3 | r2 << 2 | r3) == label


def test_known_labels() -> None:
    assert encode(1, 0) == 0x20000  # experiment 1 is written least significant bit first: bit 17
    assert decode(0x20000) == (1, 0)
    assert decode(0x0013C) == (0, 0x13C >> 2 & 63)
    for bad in (-1, 1 << 20):
        with pytest.raises(ValueError):
            decode(bad)
    with pytest.raises(ValueError):
        encode(512, 0)


def sample(label: int | None, src: str = DTN6, dport: int = 5201, proto: int = 6) -> Sample:
    return Sample(ip_address(src), ip_address(CLOUD6), proto, 40000, dport, 1514, 64, ip_address("127.0.0.1"), 4, label)


def test_a_marked_flows_first_sample_is_a_start() -> None:
    sink = RecordingSink()
    marks = FlowLabelMarks(sink, [16], lambda _s, _d: True)
    got = marks.observe(sample(encode(16, 14, 5)), 10.0)
    assert got is not None and got.kind is SightingKind.FLOW_LABEL and got.state is SightingState.START
    assert (str(got.src_ip), str(got.dst_ip), got.src_port, got.dst_port) == (DTN6, CLOUD6, 40000, 5201)
    assert got.evidence["experiment"] == "16" and got.evidence["activity"] == "14"
    assert marks.observe(sample(encode(16, 14, 9)), 11.0) is None  # the same flow, within 2 s
    assert marks.observe(sample(encode(16, 14)), 12.5) is not None  # asked again later
    assert len(sink.sightings) == 2


def test_unmarked_foreign_and_filtered_samples_make_nothing() -> None:
    sink = RecordingSink()
    marks = FlowLabelMarks(sink, [16], lambda src, _d: src != ip_address("2001:db8:3::99"))
    assert marks.observe(sample(None), 1.0) is None  # IPv4, or no label
    assert marks.observe(sample(0), 1.0) is None
    assert marks.observe(sample(encode(17, 14)), 1.0) is None  # an experiment the campus does not mark
    assert marks.observe(sample(encode(16, 1), proto=1), 1.0) is None  # not TCP or UDP
    assert marks.observe(sample(encode(16, 1), src="2001:db8:3::99"), 1.0) is None  # outside every grant
    assert marks.observe(sample(1 << 21), 1.0) is None
    assert sink.sightings == []
    assert marks.counts == {"flow_label_other": 1, "flow_label_filtered": 1, "flow_label_malformed": 1}


def test_goflow2_lines_carry_the_label_for_ipv6_only() -> None:
    line = {"type": "SFLOW_5", "sampling_rate": 8, "sampler_address": "127.0.0.1", "bytes": 1518, "proto": "TCP"}
    line |= {"src_port": 1000, "dst_port": 5201, "in_if": 4, "ipv6_flow_label": 794939}
    v6 = parse_line(json.dumps({**line, "etype": "IPv6", "src_addr": DTN6, "dst_addr": CLOUD6}))
    v4 = parse_line(json.dumps({**line, "etype": "IPv4", "src_addr": "198.51.100.30", "dst_addr": "203.0.113.10"}))
    assert v6 is not None and v6.flow_label == 794939 and v6.in_if == 4 and decode(794939) == (16, 14)
    assert v4 is not None and v4.flow_label is None


def test_the_topology_key_is_off_by_default_and_checked(dual) -> None:
    import yaml

    from tests.support.paths import REPO
    from viplanes.topologies.loader import TopologyError, parse_topology

    data = yaml.safe_load((REPO / "topologies" / "campus-dualstack.yaml").read_text())
    assert dual.flow_label_experiments == ()
    assert parse_topology(
        {**data, "ipv6_flow_label": {"scheme": "scitags", "experiments": [16, 3]}}
    ).flow_label_experiments == (3, 16)
    for bad, message in (
        ({"scheme": "other", "experiments": [16]}, "ipv6_flow_label.scheme: expected one of scitags"),
        ({"scheme": "scitags", "experiments": [512]}, "ipv6_flow_label.experiments: expected a list"),
        ({"scheme": "scitags", "experiments": []}, "ipv6_flow_label.experiments: expected a list"),
        ({"scheme": "scitags"}, "missing required key 'experiments'"),
        ("scitags", "ipv6_flow_label: expected a mapping"),
    ):
        with pytest.raises(TopologyError) as exc:
            parse_topology({**data, "ipv6_flow_label": bad})
        assert any(message in p for p in exc.value.problems), exc.value.problems
