"""On a real Open vSwitch (a private ovs-vswitchd, tests/support/privovs.py, SflowBed) sampling 1 in 1
with its agent set to an address: the agent checks and the flow-label marks as the switch really
reports them. IPv6 frames from host ``a`` labelled with scitags experiment 16 make one
``flow_label`` sighting; the same frames sent from host ``c``'s port with ``a``'s source address
(a host spoofing another's flow) are refused at the input-port check; a label of another
experiment is not a mark. Also prints the UDP source OVS sends from and the ifIndexes it reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.privovs import SflowBed
from viplanes.detection.sflow import switchconfig
from viplanes.detection.sflow.flowlabel import encode
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED
from viplanes.detection.sflow.switchconfig import SwitchSampling

REPO = Path(__file__).resolve().parents[2]
A6, B6 = "2001:db8:9::1", "2001:db8:9::2"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not GOFLOW2_CACHED.exists() or not shutil.which("ovs-vswitchd"), reason="goflow2 or OVS"),
]

SENDER = """
import socket, struct, sys
ifname, src_mac, dst_mac, src, dst, dport, label, n = sys.argv[1:9]
payload = b"x" * 64
udp = struct.pack("!HHHH", 40000, int(dport), 8 + len(payload), 0) + payload
ip6 = struct.pack("!IHBB16s16s", 6 << 28 | int(label), len(udp), 17, 64,
                  socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst))
frame = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\\x86\\xdd" + ip6 + udp
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
for _ in range(int(n)):
    s.send(frame)
"""


def mac(bed: SflowBed, host: str) -> str:
    return bed.in_ns(bed.host_ns(host), "cat", "/sys/class/net/eth0/address").strip()


def send(bed: SflowBed, host: str, src: str, dport: int, label: int, n: int = 5) -> None:
    argv = ["eth0", mac(bed, host), mac(bed, "b"), src, B6, str(dport), str(label), str(n)]
    bed.in_ns(bed.host_ns(host), "python3", "-c", SENDER, *argv)


def test_real_ovs_samples_pass_the_agent_checks_and_mark_lanes() -> None:
    bed = SflowBed()
    runner = None
    try:
        bed.start()
        ifindex = {h: int(bed.in_ns(bed.ns, "cat", f"/sys/class/net/br0{h}/ifindex")) for h in "abcd"}
        v6 = {"a": A6, "b": B6, "c": "2001:db8:9::3", "d": "2001:db8:9::4"}
        hosts = {ifindex[h]: [bed.ip(h), v6[h]] for h in "abcd"}
        facts = {"agent": "127.0.0.2", "sources": ["127.0.0.1"], "hosts": hosts, "experiments": [16]}
        runner = subprocess.Popen(
            ["ip", "netns", "exec", bed.ns, str(REPO / ".venv/bin/python"), "-m", "tests.support.sflowrun"]
            + [json.dumps(facts), "60"],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert runner.stdout is not None and runner.stdout.readline().strip() == "ready", runner.stderr
        sampling = SwitchSampling(target="127.0.0.1:6343", sampling=1, agent="127.0.0.2", polling_s=0)
        switchconfig.enable(["br0"], sampling, bed.vsctl_argv())
        time.sleep(1.0)  # ovs-vswitchd applies the sFlow row asynchronously: a burst sent at once went unsampled
        send(bed, "a", A6, 5201, encode(16, 14, 7))  # a's own marked flow
        send(bed, "c", A6, 5202, encode(16, 14, 7))  # c sends as a: a's address on c's port
        send(bed, "a", A6, 5203, encode(17, 14, 7))  # a label of another experiment
        out, err = runner.communicate(timeout=30)  # closes its stdin: it drains, then reports
        got = json.loads(out.strip().splitlines()[-1])
        print(f"\nOVS datagrams from {got['sources']}; ifIndexes {ifindex}; refused {got['refused']}")
        print(f"marks {got['marks']}; sightings {got['sightings']}")
        assert [(s["kind"], s["dport"], s["experiment"]) for s in got["sightings"]] == [("flow_label", 5201, "16")]
        assert got["refused"].get("sflow_link_port", 0) >= 1, got
        assert got["marks"].get("flow_label_other", 0) >= 1, got
        assert set(got["sources"]) == {"127.0.0.1"}, got
    finally:
        if runner is not None and runner.poll() is None:
            runner.kill()
        bed.stop()
