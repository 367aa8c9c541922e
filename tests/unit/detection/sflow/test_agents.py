"""Only the topology's sampling switches count: forged sFlow datagrams (from a host's address,
with a spoofed agent address) and samples claiming an inter-switch input port are refused and
counted, and never reach the detector (viplanes/detection/sflow/agents.py, gate.py)."""

from __future__ import annotations

import io
import json
from ipaddress import ip_address
from pathlib import Path

import pytest
import yaml

from tests.support.paths import CAMPUS_YAML
from tests.support.sflowgen import datagram, flow_sample
from tests.support.sightsink import RecordingSink
from viplanes.auto.sflowwire import sampling_switches
from viplanes.detection.sflow.agents import SampleGuard, datagram_agent
from viplanes.detection.sflow.detector import Detector, DetectorSettings, Sample
from viplanes.detection.sflow.gate import SflowGate
from viplanes.detection.sflow.goflow import CollectorProcess, CollectorSettings
from viplanes.detection.sflow.seal import AgentSeal
from viplanes.topologies.loader import TopologyError, parse_topology

CAMPUS = CAMPUS_YAML
DTN, DESKTOP, CLOUD = "198.51.100.30", "10.1.0.10", "203.0.113.10"


def campus(s3_sflow: dict | None = None) -> dict:
    """The campus, s3 (the DTN on port 4; the NAT on 1, the bypass link on 3) sampling with its
    own agent 192.0.2.3 sent from 192.0.2.3, ifIndex 104 for port 4 and 103 for port 3."""
    data = yaml.safe_load(CAMPUS.read_text())
    sflow = s3_sflow if s3_sflow is not None else {"agent": "192.0.2.3", "ifindex": {4: 104, 3: 103}}
    for sw in data["switches"]:
        sw.pop("sflow", None)
        if sw["name"] == "s3":
            sw["sflow"] = sflow
        if sw["name"] == "s1":
            sw["sflow"] = {"agent": "192.0.2.1", "from": ["192.0.2.1", "192.0.2.11"]}
    return data


def guard(data: dict | None = None) -> SampleGuard:
    return SampleGuard(sampling_switches(parse_topology(data or campus())))


def sample(src: str = DTN, agent: str | None = "192.0.2.3", in_if: int | None = 104) -> Sample:
    return Sample(
        ip_address(src), ip_address(CLOUD), 6, 40000, 9100, 1514, 64, ip_address(agent) if agent else None, in_if
    )


def dgram(agent: str) -> bytes:
    return datagram(agent, [flow_sample(DTN, CLOUD, 40000, 9100, 64)])


def test_a_switchs_own_datagram_and_sample_are_admitted() -> None:
    g = guard()
    assert g.datagram_refusal(ip_address("192.0.2.3"), dgram("192.0.2.3")) is None
    assert g.datagram_refusal(ip_address("192.0.2.11"), dgram("192.0.2.1")) is None  # s1's second address
    assert g.sample_refusal(sample()) is None


def test_forged_datagram_from_a_hosts_address_is_refused() -> None:
    g = guard()
    assert not g.datagram(ip_address(DTN), dgram("192.0.2.3"))  # the DTN claims to be s3
    assert not g.datagram(ip_address("::ffff:10.1.0.10"), dgram("192.0.2.3"))  # mapped v4 is still the desktop
    assert g.counts == {"sflow_foreign_source": 2}


def test_spoofed_agent_address_is_refused() -> None:
    g = guard()
    # sent from s3's address (or spoofing it), claiming an agent no switch has
    assert g.datagram_refusal(ip_address("192.0.2.3"), dgram("198.51.100.30")) == "sflow_foreign_agent"
    # s1's agent sent from s3's address: a real agent, from the wrong switch
    assert g.datagram_refusal(ip_address("192.0.2.3"), dgram("192.0.2.1")) == "sflow_agent_mismatch"
    # not sFlow v5 at all
    assert g.datagram_refusal(ip_address("192.0.2.3"), b"\x00\x00\x00\x04" + bytes(40)) == "sflow_malformed"
    assert datagram_agent(b"\x00\x00\x00\x05\x00\x00\x00\x02" + bytes(4)) is None  # v6 agent, truncated


def test_sample_claiming_an_inter_switch_port_is_refused() -> None:
    g = guard()
    assert g.sample_refusal(sample(in_if=103)) == "sflow_link_port"  # s3's bypass link
    assert g.sample_refusal(sample(in_if=None)) == "sflow_link_port"
    assert g.sample_refusal(sample(in_if=999)) == "sflow_link_port"
    # the desktop's flow as s3 would see it: sampled where it passes, not where it starts
    assert g.sample_refusal(sample(src=DESKTOP, in_if=104)) == "sflow_not_source_switch"
    assert g.sample_refusal(sample(agent="192.0.2.99")) == "sflow_foreign_agent"
    assert g.sample_refusal(sample(agent=None)) == "sflow_foreign_agent"


def test_the_nats_translated_flows_count_at_its_border_port() -> None:
    """The campus NAT's outside leg plugs into s3 port 1: a translated flow starts there (NAT
    pairing compares it with the desktop's sample at s1); port 1 is checked as a host's."""
    nat = sample(src="198.51.100.2", in_if=101)
    assert guard(campus({"agent": "192.0.2.3"})).sample_refusal(nat) == "sflow_port_unknown"
    with_port = campus({"agent": "192.0.2.3", "ifindex": {1: 101, 3: 103, 4: 104}})
    assert guard(with_port).sample_refusal(nat) is None
    assert guard(with_port).sample_refusal(sample(src="198.51.100.2", in_if=103)) == "sflow_link_port"


def test_without_ifindexes_a_spoofed_sample_is_refused() -> None:
    """Issue 41: OVS samples a frame before the host source guard drops it, so a sample with the
    DTN's source taken on another port (the server's, forging it) made an automatic lane in the
    DTN's name when the switch declared no ifIndexes. Now an unknown input port is refused."""
    g = guard(campus({"agent": "192.0.2.3"}))
    assert g.sample_refusal(sample(in_if=105)) == "sflow_port_unknown"  # ports neither declared nor learned
    assert g.sample_refusal(sample(in_if=None)) == "sflow_port_unknown"
    assert g.sample_refusal(sample(src=DESKTOP)) == "sflow_not_source_switch"


class Learned:
    """An OVSDB as ``ifindex.OvsdbIfindexes`` answers it: s3's ports 4 (DTN) and 1 (NAT) known;
    port 5 (added later, no host of the DTN's there) only after a fresh read."""

    def __init__(self) -> None:
        self.reads: list[bool] = []

    def ifindexes(self, switch: str, fresh: bool = False) -> dict[int, int]:
        self.reads.append(fresh)
        return {4: 104, 1: 101} | ({5: 105} if fresh else {}) if switch == "s3" else {}


def test_learned_ifindexes_trace_a_sample_to_its_port() -> None:
    learned = Learned()
    g = SampleGuard(sampling_switches(parse_topology(campus({"agent": "192.0.2.3", "ifindex": "ovsdb"}))), learned)
    assert g.sample_refusal(sample(in_if=104)) is None  # the DTN on its own port
    assert g.sample_refusal(sample(in_if=105)) == "sflow_link_port"  # the DTN's source on port 5: forged
    assert True in learned.reads  # an unknown ifIndex asked for a fresh read
    assert g.sample_refusal(sample(in_if=999)) == "sflow_port_unknown"


def test_ifindex_ovsdb_is_read_from_the_topology() -> None:
    topo = parse_topology(campus({"agent": "192.0.2.3", "ifindex": "ovsdb:tcp:192.0.2.3:6640"}))
    assert topo.switch("s3").sflow.ifindex_ovsdb == "tcp:192.0.2.3:6640"  # type: ignore[union-attr]


def test_no_sampling_switch_refuses_everything() -> None:
    data = campus()
    for sw in data["switches"]:
        sw.pop("sflow", None)
    g = guard(data)
    assert g.datagram_refusal(ip_address("127.0.0.1"), dgram("127.0.0.1")) == "sflow_foreign_source"
    assert g.sample_refusal(sample(agent="127.0.0.1")) == "sflow_foreign_agent"


def _line(s: Sample) -> bytes:
    doc = {"type": "SFLOW_5", "sampling_rate": s.sampling_rate, "sampler_address": str(s.agent), "bytes": 1514}
    doc |= {"src_addr": str(s.src_ip), "dst_addr": CLOUD, "proto": "TCP", "src_port": 40000, "dst_port": 9100}
    doc |= {"in_if": s.in_if, "etype": "IPv4"}
    return json.dumps(doc).encode() + b"\n"


@pytest.mark.parametrize(
    ("forged", "reason"),
    [
        (sample(in_if=103), "sflow_link_port"),
        (sample(agent="192.0.2.99"), "sflow_foreign_agent"),
        (sample(src=DESKTOP), "sflow_not_source_switch"),
    ],
)
def test_forged_samples_never_reach_the_detector(forged: Sample, reason: str) -> None:
    """An elephant's worth of forged samples (as goflow2 writes them) makes no sighting; the same
    samples from s3's DTN port do."""
    g = guard()
    for good, want in ((forged, 0), (sample(), 1)):
        sink = RecordingSink()
        det = Detector(sink, lambda _s, _d: True, DetectorSettings(threshold_bps=1e6, min_samples=4))
        collector = CollectorProcess(
            det, lambda: 100.0, CollectorSettings(), admit=lambda s: s if g.sample(s) else None
        )
        collector._read(io.BytesIO(_line(good) * 200))
        assert len(sink.sightings) == want
    assert g.counts[reason] == 200


def test_gate_forwards_only_admitted_datagrams_sealed() -> None:
    import socket

    g = guard()
    seal = AgentSeal(sw.agent for sw in g.switches)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as goflow:
        goflow.bind(("127.0.0.1", 0))
        goflow.settimeout(2)
        gate = SflowGate(g, ("127.0.0.1", 0), goflow.getsockname(), seal)
        try:
            assert not gate.receive(dgram("192.0.2.3"), DTN)  # a host forging s3
            assert not gate.receive(dgram("192.0.2.99"), "192.0.2.3")  # spoofed agent
            assert not gate.receive(dgram("192.0.2.3"), "not-an-address")
            assert gate.receive(dgram("192.0.2.3"), "192.0.2.3")
            forwarded = goflow.recv(65535)
            assert seal.unseal(datagram_agent(forwarded)) == ip_address("192.0.2.3")
            assert forwarded.endswith(dgram("192.0.2.3")[12:])  # only the agent address changed
            assert gate.forwarded == 1
            assert gate.guard.counts == {"sflow_foreign_source": 1, "sflow_foreign_agent": 1, "sflow_malformed": 1}
        finally:
            gate.stop()


@pytest.mark.parametrize(
    ("sflow", "message"),
    [
        ({"agent": "not-an-ip"}, "switches[2].sflow.agent: bad IP address"),
        ({"agent": "192.0.2.3", "from": []}, "switches[2].sflow.from: at least one address"),
        ({"agent": "192.0.2.3", "ifindex": {4: 0}}, "switches[2].sflow.ifindex.4: expected PORT: IFINDEX"),
        ({"agent": "192.0.2.3", "ifindex": [1]}, "switches[2].sflow.ifindex: expected a mapping"),
        ({"agent": "192.0.2.3", "ifindex": "ovsdb:http:x"}, "switches[2].sflow.ifindex: expected a mapping"),
        ({"agent": "192.0.2.3", "port": 1}, "switches[2].sflow.port: unknown key"),
        ({"from": ["192.0.2.3"]}, "switches[2].sflow: missing required key 'agent'"),
    ],
)
def test_bad_sflow_keys_are_named(sflow: dict, message: str) -> None:
    with pytest.raises(TopologyError) as exc:
        parse_topology(campus(sflow))
    assert any(message in p for p in exc.value.problems), exc.value.problems


def test_serve_stops_in_one_line_when_the_collector_port_is_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    import socket

    from click.testing import CliRunner

    from viplanes.cli.main import main as cli

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        monkeypatch.setenv("VIPLANES_SFLOW_ENABLED", "1")
        monkeypatch.setenv("VIPLANES_SFLOW_LISTEN", f"127.0.0.1:{taken.getsockname()[1]}")
        monkeypatch.setenv("VIPLANES_CONFIG", str(tmp_path / "none.toml"))
        monkeypatch.setenv("VIPLANES_SFLOW_GOFLOW2", str(tmp_path / "no-goflow2"))  # never runs forever
        args = ["serve", "--dataplane", "memory", "--db", f"sqlite:///{tmp_path}/v.db", "--api", "127.0.0.1:9"]
        r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1, r.output
    assert r.output.strip().splitlines()[-1] == "Error: sflow: cannot listen: Address already in use", r.output
