"""Lanes outlive a failed campus link (issue 42), on the lab's redundant campus
(topologies/campus-redundant.yaml: two parallel s2-s3 bypass links for the desktop).

A UDP probe at 1,000 datagrams/s (echoed, so the border's conntrack sees replies) and a paced
8 MiB TCP upload ride two lanes of the desktop. The bypass link the lanes use is cut (its veth at
the border set down, as a pulled cable): the probe's longest gap must stay under 1 s with the
controller's re-route (the switches declared without fast-failover groups) and under 100 ms with
the groups (the switches fail over by themselves), and the upload must finish intact while the
link is still down. Then the second link is cut too: the lanes are held and the controller says
so; the link the lanes were NOT using returns: traffic flows again within 1 s of its hold-down.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
import yaml

from tests.integration.test_doctor_lab import readiness
from tests.support.labcampus import CLOUD, lab_campus
from tests.support.paths import REPO

pytestmark = [pytest.mark.integration, pytest.mark.solo]  # fail-over within 100 ms: alone

REDUNDANT = REPO / "topologies" / "campus-redundant.yaml"
TCP_PORT, UDP_PORT = 5201, 5301
HOLD_DOWN_S = 0.5
PROBE = [sys.executable, "-m", "tests.support.linkprobe"]
GRANT = {
    "src_prefixes": ["10.1.0.0/24"],
    "dst_prefixes": ["203.0.113.0/24"],
    "protocols": ["tcp", "udp"],
    "ports": ["5201-5399"],
    "max_duration_s": 3600,
    "max_lanes": 5,
}


def _controller_reroute_only(tmp_path: Path) -> Path:
    """campus-redundant.yaml with every switch declared without fast-failover groups."""
    data = yaml.safe_load(REDUNDANT.read_text())
    for sw in data["switches"]:
        sw["features"] = {**sw.get("features", {}), "fast_failover": False}
    out = tmp_path / "campus-redundant-no-ff.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def _lane(serve, token: str, protocol: str, port: int, src_ip: str = "10.1.0.10") -> dict:
    r = requests.post(
        f"{serve.url}/api/v1/lanes",
        headers={"Authorization": f"Bearer {token}"},
        timeout=15,
        json={
            "src_ip": src_ip,
            "dst_ip": CLOUD,
            "protocol": protocol,
            "dst_port": port,
            "duration_s": 900,
            "purpose": "link failover test",
        },
    )
    assert r.status_code == 201, r.text
    assert r.json()["state"] == "active", r.json()
    return r.json()


def _link(lab, switch: str, port: int, up: bool) -> None:
    iface = f"{lab.bridge(switch)}-eth{port}"
    subprocess.run(["ip", "link", "set", iface, "up" if up else "down"], check=True, timeout=10)


def _popen(host, args: list[str]):
    return host.popen([*PROBE, *args], cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read(path: Path, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size:
            return json.loads(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{path.name} not written within {timeout_s} s")


def _cut_under_traffic(lab, tmp_path: Path, probe_s: int, cut: Callable[[], None]) -> tuple[dict, dict, dict, float]:
    """A 1,000/s UDP probe and a paced 8 MiB TCP upload from the desktop to the cloud; ``cut``
    2 s into them. (upload sent, upload received, probe report, wall time of the cut)."""
    cloud, desktop = lab.host("cloud"), lab.host("desktop")
    udp_out, tcp_out = tmp_path / "udp.json", tmp_path / "tcp.json"
    sinks = [
        _popen(cloud, ["udp-sink", str(UDP_PORT), str(udp_out), str(probe_s + 20)]),
        _popen(cloud, ["tcp-sink", str(TCP_PORT), str(tcp_out), "40"]),
    ]
    time.sleep(0.5)
    probe = _popen(desktop, ["udp-send", CLOUD, str(UDP_PORT), "1000", str(probe_s)])
    upload = _popen(desktop, ["tcp-send", CLOUD, str(TCP_PORT), str(8 << 20), str(1 << 20)])
    try:
        time.sleep(2.0)
        cut_at = time.time()
        cut()
        sent_out, _ = upload.communicate(timeout=40)
        sent = json.loads(sent_out.strip().splitlines()[-1])
        got = _read(tcp_out, 30)
        probe_out, _ = probe.communicate(timeout=30)
        udp = {**_read(udp_out, 20), "sent": int(probe_out.split()[-1])}
    finally:
        for p in [probe, upload, *sinks]:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    return sent, got, udp, cut_at


def network_gap_s(udp: dict) -> float:
    """The probe's longest stretch of datagrams lost, in seconds of its 1,000/s schedule, the
    tail after the last one received included (traffic that never came back). The arrival gap
    also counts the sender or the sink not being scheduled on a loaded machine (0.14-0.57 s seen
    with nothing cut), so it is printed, not asserted; nor is the count received, which a sink
    that fell behind its socket buffer lowers (the loss run counts the network's gap either way)."""
    tail = udp["sent"] - 1 - udp["last_seq"]
    return max(udp["longest_loss_run"], tail) / 1000


def _received(cloud, since: int = 0) -> int:
    """Packets the cloud host's NIC has received so far (the probe's, mostly)."""
    return int(cloud.cmd("cat /sys/class/net/cloud-eth0/statistics/rx_packets").strip()) - since


def _traffic_back_s(lab, cloud, switch: str, port: int) -> float | None:
    """Bring ``switch``:``port`` up; seconds until the lane's traffic arrives again (over 50
    datagrams), or None within the hold-down plus 3 s."""
    back_at = time.monotonic()
    _link(lab, switch, port, up=True)
    base = _received(cloud)
    while time.monotonic() - back_at < HOLD_DOWN_S + 3:
        time.sleep(0.05)
        if _received(cloud, base) > 50:
            return time.monotonic() - back_at
    return None


def _active_within(serve, lane_id: int, headers: dict, tries: int) -> dict:
    """The lane as the API reads it, polled every 0.1 s until ``active`` or ``tries`` reads."""
    lane: dict = {}
    for _ in range(tries):
        lane = requests.get(f"{serve.url}/api/v1/lanes/{lane_id}", headers=headers, timeout=5).json()
        if lane["state"] == "active":
            break
        time.sleep(0.1)
    return lane


def test_a_cut_bypass_link_moves_lanes_and_no_path_holds_them(tmp_path: Path, monkeypatch, record_property) -> None:
    monkeypatch.setenv("VIPLANES_LINK_HOLD_DOWN_S", str(HOLD_DOWN_S))
    no_ff = _controller_reroute_only(tmp_path)
    with lab_campus(tmp_path, "rita", GRANT, topology=no_ff, wiring=REDUNDANT) as (lab, serve, token):
        _lane(serve, token, "tcp", TCP_PORT)
        udp_lane = _lane(serve, token, "udp", UDP_PORT)
        cloud, desktop = lab.host("cloud"), lab.host("desktop")
        # the lanes' bypass link s2:3-s3:3, cut at the border
        sent, got, udp, cut_at = _cut_under_traffic(lab, tmp_path, 12, lambda: _link(lab, "s3", 3, up=False))
        record_property("probe_longest_gap_s", udp["longest_gap_s"])
        print(
            f"\nbypass link cut: probe {udp['received']} of ~12000 received, longest gap "
            f"{udp['longest_gap_s']:.3f} s at {udp['gap_at_s']:.1f} s (longest loss "
            f"{udp['longest_loss_run'] / 1000:.3f} s); upload {got['bytes']} bytes, "
            f"finished {got['done_at'] - cut_at:.1f} s after the cut"
        )
        assert got["sha256"] == sent["sha256"] and got["bytes"] == 8 << 20
        assert network_gap_s(udp) < 1.0, udp
        # the upload ended while the link was still down (it still is)

        # both bypass links down: nothing to move to; the lanes are held
        probe = _popen(desktop, ["udp-send", CLOUD, str(UDP_PORT), "500", "12"])
        try:
            cut2 = time.monotonic()
            _link(lab, "s3", 5, up=False)
            lane = {}
            while time.monotonic() - cut2 < 5:
                lane = requests.get(
                    f"{serve.url}/api/v1/lanes/{udp_lane['id']}",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=5,
                ).json()
                if lane["state"] == "interrupted":
                    break
                time.sleep(0.05)
            told = time.monotonic() - cut2
            record_property("interrupted_after_s", told)
            print(f"\nboth links cut: lane {lane['state']} after {told:.2f} s: {lane['reason']}")
            assert lane["state"] == "interrupted" and told < 2.0, lane
            time.sleep(1.0)
            base = _received(cloud)
            time.sleep(1.0)
            assert _received(cloud, base) < 20, "lane traffic still arrives with both bypass links down"
            r = readiness(serve)  # an operator's report names the links
            assert r.status_code == 503 and "s2:4-s3:5" in r.text, r.text
            lane = requests.get(
                f"{serve.url}/api/v1/lanes/{udp_lane['id']}", headers={"Authorization": f"Bearer {token}"}, timeout=5
            ).json()
            assert lane["state"] == "interrupted" and "s2:3-s3:3" in lane["reason"], lane
            # the link the lanes were NOT using comes back: held down HOLD_DOWN_S, then carried
            flowing = _traffic_back_s(lab, cloud, "s3", 5)
            record_property("traffic_back_s", flowing)
            print(f"second link back: traffic again {flowing} s after its return (hold-down {HOLD_DOWN_S} s)")
            assert flowing is not None and flowing < HOLD_DOWN_S + 1.0
            state = _active_within(serve, udp_lane["id"], {"Authorization": f"Bearer {token}"}, 20)["state"]
            assert state == "active"
        finally:
            if probe.poll() is None:
                probe.kill()
                probe.wait(5)


def test_a_lane_requested_with_no_bypass_path_is_held_and_carried_when_one_returns(
    tmp_path: Path, monkeypatch, record_property
) -> None:
    """Both of the desktop's bypass links are down when the lane is asked for: the API answers
    201 ``interrupted`` naming the links (not an error), the lane's packets go nowhere; one link
    returns: the lane rides it within 1 s of its hold-down, and reads ``active``, without the
    researcher asking again."""
    monkeypatch.setenv("VIPLANES_LINK_HOLD_DOWN_S", str(HOLD_DOWN_S))
    with lab_campus(tmp_path, "hana", GRANT, topology=REDUNDANT) as (lab, serve, token):
        cloud, desktop = lab.host("cloud"), lab.host("desktop")
        auth = {"Authorization": f"Bearer {token}"}
        _link(lab, "s3", 3, up=False)
        _link(lab, "s3", 5, up=False)
        deadline = time.monotonic() + 5
        while readiness(serve).status_code != 503 or "s2:4-s3:5" not in readiness(serve).text:
            assert time.monotonic() < deadline, "the controller never saw both links down"
            time.sleep(0.05)
        r = requests.post(
            f"{serve.url}/api/v1/lanes",
            headers=auth,
            timeout=15,
            json={
                "src_ip": "10.1.0.10",
                "dst_ip": CLOUD,
                "protocol": "udp",
                "dst_port": UDP_PORT,
                "duration_s": 900,
                "purpose": "held from its start",
            },
        )
        assert r.status_code == 201, r.text
        lane = r.json()
        print(f"\nlane asked for with both bypass links down: {lane['state']}: {lane['reason']}")
        assert lane["state"] == "interrupted" and "s2:3-s3:3" in lane["reason"], lane
        probe = _popen(desktop, ["udp-send", CLOUD, str(UDP_PORT), "500", "8"])
        try:
            time.sleep(1.0)
            base = _received(cloud)
            time.sleep(1.0)
            assert _received(cloud, base) < 20, "lane traffic arrives with both bypass links down"
            flowing = _traffic_back_s(lab, cloud, "s3", 5)
            record_property("held_lane_traffic_back_s", flowing)
            print(f"link back: the held lane's traffic flows {flowing} s after (hold-down {HOLD_DOWN_S} s)")
            assert flowing is not None and flowing < HOLD_DOWN_S + 1.0
            state = _active_within(serve, lane["id"], auth, 30)
            assert state and state["state"] == "active", state
        finally:
            if probe.poll() is None:
                probe.kill()
                probe.wait(5)


def test_a_failed_transit_switch_moves_the_dtn_lane_to_the_disjoint_path(
    tmp_path: Path, monkeypatch, record_property
) -> None:
    """Every port of the transit switch the DTN's lane crosses goes down (a dead switch): its
    neighbours report their ports down and the lane moves to the other two-hop bypass path."""
    from viplanes.topologies.loader import load_topology
    from viplanes.topologies.paths import lane_path

    monkeypatch.setenv("VIPLANES_LINK_HOLD_DOWN_S", str(HOLD_DOWN_S))
    transit = lane_path(load_topology(REDUNDANT), "dtn")[1].switch  # s6 or s7
    grant = {**GRANT, "src_prefixes": ["198.51.100.30/32"]}
    no_ff = _controller_reroute_only(tmp_path)
    with lab_campus(tmp_path, "dora", grant, topology=no_ff, wiring=REDUNDANT) as (lab, serve, token):
        r = requests.post(
            f"{serve.url}/api/v1/lanes",
            headers={"Authorization": f"Bearer {token}"},
            timeout=15,
            json={
                "src_ip": "198.51.100.30",
                "dst_ip": CLOUD,
                "protocol": "udp",
                "dst_port": UDP_PORT,
                "duration_s": 900,
                "purpose": "transit failure test",
            },
        )
        assert r.status_code == 201 and r.json()["state"] == "active", r.text
        cloud, dtn = lab.host("cloud"), lab.host("dtn")
        out = tmp_path / "udp.json"
        sink = _popen(cloud, ["udp-sink", str(UDP_PORT), str(out), "27"])
        time.sleep(0.5)
        probe = _popen(dtn, ["udp-send", CLOUD, str(UDP_PORT), "1000", "7"])
        try:
            time.sleep(2.0)
            for port in (1, 2):  # the transit switch dies: both its ports go dark
                _link(lab, transit, port, up=False)
            probe_out, _ = probe.communicate(timeout=30)
            udp = {**_read(out, 20), "sent": int(probe_out.split()[-1])}
        finally:
            for p in (probe, sink):
                if p.poll() is None:
                    p.kill()
                    p.wait(5)
        record_property("transit_longest_gap_s", udp["longest_gap_s"])
        print(
            f"\ntransit {transit} failed: probe {udp['received']} of ~7000 received, "
            f"longest gap {udp['longest_gap_s']:.3f} s at {udp['gap_at_s']:.1f} s"
        )
        assert network_gap_s(udp) < 1.0, udp


RING = REPO / "tests" / "unit" / "fixtures" / "topologies" / "campus-ring.yaml"  # the tests' own campus


@pytest.mark.parametrize("campus", [REDUNDANT, RING], ids=["redundant", "ring"])
def test_fast_failover_groups_move_the_lanes_within_100_ms(
    campus: Path, tmp_path: Path, monkeypatch, record_property
) -> None:
    """OVS has fast-failover groups: the switch where the desktop lanes' backup leaves their
    path (s2 on the shipped campus, the ring's access switch) holds each lane's group, so when
    the link it sends on is cut (at the far end, as a pulled cable) it sends on the backup by
    itself, before the controller hears of it; the controller's re-route then tidies up."""
    from viplanes.controller.compile.failover import backup_path
    from viplanes.topologies.loader import load_topology
    from viplanes.topologies.paths import lane_path

    topo = load_topology(campus)
    desktop_host = topo.host("desktop")
    hops = lane_path(topo, "desktop")
    backup = backup_path(topo, hops)
    assert backup is not None
    d = hops[backup.diverge]
    link = next(lk for lk in topo.links if (d.switch, d.out_port) in ((e.switch, e.port) for e in (lk.a, lk.b)))
    far, link_name = (link.b if link.a.switch == d.switch else link.a), link.name
    grant = {**GRANT, "src_prefixes": [str(desktop_host.iface.ip.network)]}
    src = str(desktop_host.iface.ip.ip)
    monkeypatch.setenv("VIPLANES_LINK_HOLD_DOWN_S", str(HOLD_DOWN_S))
    with lab_campus(tmp_path, "fifi", grant, topology=campus) as (lab, serve, token):
        lanes = [_lane(serve, token, "tcp", TCP_PORT, src), _lane(serve, token, "udp", UDP_PORT, src)]
        groups = subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", lab.bridge(d.switch)],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        assert groups.count("type=ff") == len(lanes), groups
        # the lanes' link from D, cut at its far end
        sent, got, udp, cut_at = _cut_under_traffic(
            lab, tmp_path, 7, lambda: _link(lab, far.switch, far.port, up=False)
        )
        lost_s = network_gap_s(udp)  # datagrams sent 1 ms apart
        record_property("ff_probe_longest_gap_s", udp["longest_gap_s"])
        record_property("ff_probe_longest_loss_s", lost_s)
        print(
            f"\n{topo.name}: link {link_name} cut, fast failover: probe {udp['received']} of ~7000 received, "
            f"longest loss {lost_s:.3f} s, longest arrival gap {udp['longest_gap_s']:.3f} s at "
            f"{udp['gap_at_s']:.1f} s; upload {got['bytes']} bytes, finished {got['done_at'] - cut_at:.1f} s after the cut"
        )
        assert got["sha256"] == sent["sha256"] and got["bytes"] == 8 << 20
        # the network's gap: consecutive datagrams lost. The arrival gap also counts the
        # sender or sink not being scheduled on a loaded machine (0.14-0.57 s seen with nothing
        # sent to a switch at that moment), so it is recorded, not asserted
        assert lost_s < 0.1, udp
        r = readiness(serve)  # the operator still sees the link down
        assert r.status_code == 503 and link_name in r.text, r.text
