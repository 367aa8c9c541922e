"""A SYN flood through one lane leaves another lane's new connections working (issue 28, item 3),
on the real lab: Mininet, userspace OVS conntrack at s3, `viplanes serve`.

    desktop (10.1.0.10) -s1- s2 ==bypass== s3 - edge - s4 - cloud:5201
    server  (10.1.0.20) -s1'        (s3: conntrack, lane zones, per-lane new-connection meter)

The desktop holds a lane to cloud:5201 and floods it with raw SYNs (a new source port each) for
``FLOOD_S`` seconds; meanwhile the server, on its own lane to the same port, opens a short TCP
connection every 0.2 s. Measured: frames the desktop sent, entries in the desktop's zone, the
server's connects. Before (one commit per SYN, no meter, no zone limit) every SYN that reached
s3 became an entry: the zone grew with the flood, without bound until the datapath's table
(3,000,000 entries) was full, and then every lane's new connections failed.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests import support
from tests.support.labcampus import CAMPUS_YAML, CLOUD, Campus, lab_campus
from tests.support.procs import wait_for
from viplanes.controller.compile.ctlane import zone_layout

pytestmark = pytest.mark.integration
FLOOD = str(Path(support.__file__).with_name("synflood.py"))
DATAPATH = "netdev@ovs-netdev"
FLOOD_S = 8.0
NEW_PER_S = 100  # the border's ct_new_per_s in this test's topology
ZONE_LIMIT = 5000

_LISTEN = (
    "import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
    "s.bind(('0.0.0.0',5201));s.listen(4096);print('ready',flush=True)\n"
    "while True:\n c,a=s.accept();print(a[0],flush=True);c.close()"
)
# one short connection every 0.2 s for SECONDS; prints how many were set up and how many failed
_CONNECTS = (
    "import socket,sys,time,json;ok=bad=0;end=time.monotonic()+float(sys.argv[1])\n"
    "while time.monotonic()<end:\n"
    f" s=socket.socket();s.settimeout(1.5)\n try: s.connect(('{CLOUD}',5201));ok+=1\n"
    " except OSError: bad+=1\n finally: s.close()\n time.sleep(0.2)\n"
    "print(json.dumps({'ok':ok,'failed':bad}),flush=True)"
)


def bounded_topology(workdir: Path) -> Path:
    """campus.yaml with the border's conntrack bounds declared (ctlimits: ovs-appctl here)."""
    doc = yaml.safe_load(CAMPUS_YAML.read_text())
    for sw in doc["switches"]:
        if sw["name"] == "s3":
            sw.update(ct_new_per_s=NEW_PER_S, ct_zone_limit=ZONE_LIMIT, ct_appctl=f"ovs-vswitchd {DATAPATH}")
    path = workdir / "campus-bounded.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def flood_campus(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("ctflood")
    with lab_campus(
        work,
        "frank",
        {
            "src_prefixes": ["10.1.0.0/24"],
            "dst_prefixes": ["203.0.113.0/24"],
            "protocols": ["tcp", "udp"],
            "ports": ["5201"],
            "max_duration_s": 3600,
            "max_lanes": 5,
        },
        topology=bounded_topology(work),
    ) as (lab, serve, token):
        yield Campus(lab, serve, token)


def lane(campus: Campus, src: str, protocol: str = "tcp") -> dict:
    r = campus.api(
        "POST",
        "/lanes",
        json={
            "src_ip": src,
            "dst_ip": CLOUD,
            "protocol": protocol,
            "dst_port": 5201,
            "duration_s": 600,
            "purpose": "flood",
        },
    )
    assert r.status_code == 201 and r.json()["state"] == "active", r.text
    return r.json()


def zone_entries(zone: int) -> int:
    out = subprocess.run(
        ["ovs-appctl", "--timeout=20", "dpctl/dump-conntrack", DATAPATH, f"zone={zone}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return sum(1 for line in out.splitlines() if line.strip())


def zone_limit(zone: int) -> str:
    return subprocess.run(
        ["ovs-appctl", "--timeout=20", "dpctl/ct-get-limits", DATAPATH, f"zone={zone}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout.strip()


def test_a_syn_flood_through_one_lane_leaves_another_lanes_connections_working(flood_campus: Campus) -> None:
    lab = flood_campus.lab
    cloud, desktop, server = lab.host("cloud"), lab.host("desktop"), lab.host("server")
    flooder, victim = lane(flood_campus, "10.1.0.10"), lane(flood_campus, "10.1.0.20")
    layout = zone_layout(flood_campus_topology(flood_campus))
    zone = layout.nat(flooder["nat_ip"])
    assert layout.nat(victim["nat_ip"]) != zone
    listener = cloud.popen(["python3", "-c", _LISTEN], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs = [listener]
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        accepted: list[str] = []
        lines = listener.stdout
        reader = threading.Thread(target=lambda: accepted.extend(ln.strip() for ln in lines), daemon=True)
        reader.start()
        before = zone_entries(zone)
        gw_mac = next(m.inside.mac for m in flood_campus_topology(flood_campus).middleboxes if m.kind == "firewall")
        flood = desktop.popen(
            ["python3", FLOOD, "desktop-eth0", "02:00:00:01:00:10", gw_mac, "10.1.0.10", CLOUD, "5201", str(FLOOD_S)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(flood)
        time.sleep(1.0)  # the flood is on
        connects = server.popen(
            ["python3", "-c", _CONNECTS, str(FLOOD_S - 2.0)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        procs.append(connects)
        c_out, c_err = connects.communicate(timeout=60)
        f_out, f_err = flood.communicate(timeout=60)
        during = zone_entries(zone)
        # the listener prints each accept when it is scheduled: under load it ran a few behind the
        # connects the kernel had completed, and killing it at once lost their lines
        ok = json.loads(c_out)["ok"] if c_out.strip() else 0
        wait_for(lambda: accepted.count(victim["nat_ip"]) >= ok, 15)
        limits = zone_limit(zone)
        maxconns = subprocess.run(
            ["ovs-appctl", "--timeout=20", "dpctl/ct-get-maxconns", DATAPATH],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
        listener.kill()
        listener.wait(10)
        reader.join(10)
        peers = list(accepted)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        for ln in flood_campus.api("GET", "/lanes").json():
            if ln["state"] == "active":
                flood_campus.api("POST", f"/lanes/{ln['id']}/release")
    sent, second = json.loads(f_out), json.loads(c_out)
    print(
        f"\nflood: {sent}; desktop zone {zone}: {before} -> {during} entries; limits: {limits!r}; "
        f"server's connects during the flood: {second}; the datapath's table: {maxconns} entries"
    )
    assert sent["sent"] > 10_000, (sent, f_err)
    # one connect per 0.2 s for 6 s is ~30 unloaded; the check is that none failed, and that
    # enough ran to mean it (a loaded machine's connects take longer, so fewer fit)
    assert second["ok"] >= 10 and second["failed"] == 0, (second, c_err)
    assert peers.count(victim["nat_ip"]) >= second["ok"], peers[-5:]  # through the server's lane
    # only what the lane's new-connection meter let through became an entry (burst + rate x time)
    assert during - before <= NEW_PER_S * (FLOOD_S + 2) + NEW_PER_S, during
    assert f"zone={zone},limit={ZONE_LIMIT}" in limits, limits


def flood_campus_topology(campus: Campus):
    from viplanes.cli.serve import with_zone_base_setting
    from viplanes.topologies.loader import load_topology

    assert campus.serve.topology is not None
    return with_zone_base_setting(load_topology(campus.serve.topology))  # the session's zones


# ---- one-way UDP (issue 42): the meter counts connections, not packets -------------------------
UDP_RATE, UDP_SECONDS = 1000, 5.0
_UDP_COUNT = (
    "import socket,json,sys;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('0.0.0.0',5201));"
    "print('ready',flush=True);s.settimeout(60);n=0;srcs=set()\n"
    "try:\n while True:\n  _,a=s.recvfrom(2048);n+=1;srcs.add(a[0]);s.settimeout(float(sys.argv[1]))\n"
    "except OSError: pass\n"
    "print(json.dumps({'received':n,'from':sorted(srcs)}),flush=True)"
)
# paced datagrams from one socket (one 5-tuple) that never reads a reply
_UDP_SEND = (
    "import socket,json,sys,time;rate,secs=int(sys.argv[2]),float(sys.argv[3]);"
    "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('0.0.0.0',40123));n=0;t0=time.monotonic()\n"
    "while n<rate*secs:\n"
    " wait=t0+n/rate-time.monotonic()\n if wait>0: time.sleep(wait)\n"
    " s.sendto(b'x'*200,(sys.argv[1],5201));n+=1\n"
    "print(json.dumps({'sent':n,'seconds':round(time.monotonic()-t0,2)}),flush=True)"
)


def test_a_one_way_udp_stream_rides_its_lane_at_full_rate(flood_campus: Campus) -> None:
    """1,000 datagrams/s from one socket through the desktop's UDP lane, never a reply: each is
    conntrack ``+new`` at the border until the end. Before, each met the lane's new-connection
    meter (``ct_new_per_s`` 100 here): ~100/s plus the burst got through (issue 42: 897 of 8,000
    in 8 s). Now only the first opens a connection; the rest are committed unmetered."""
    lab = flood_campus.lab
    cloud, desktop = lab.host("cloud"), lab.host("desktop")
    udp = lane(flood_campus, "10.1.0.10", "udp")
    counter = cloud.popen(["python3", "-c", _UDP_COUNT, "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert counter.stdout is not None and counter.stdout.readline().strip() == "ready"
        fw0 = flood_campus.fw_rx_packets()
        sender = desktop.popen(
            ["python3", "-c", _UDP_SEND, CLOUD, str(UDP_RATE), str(UDP_SECONDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        s_out, s_err = sender.communicate(timeout=60)
        c_out, c_err = counter.communicate(timeout=60)
        via_fw = flood_campus.fw_rx_packets() - fw0
    finally:
        if counter.poll() is None:
            counter.kill()
            counter.wait(5)
        flood_campus.api("POST", f"/lanes/{udp['id']}/release")
    sent, got = json.loads(s_out), json.loads(c_out)
    print(f"\none-way UDP through lane {udp['id']}: {sent}; cloud: {got}; firewall saw {via_fw} packets")
    assert sent["sent"] == UDP_RATE * UDP_SECONDS, s_err
    # through the lane's own NAT only: a datagram the campus path carried would arrive from the
    # campus NAT's address. The firewall's own counter is printed, not asserted: it also counts
    # what the previous test's flood left queued there (257 packets once in CI, 0-1 alone)
    assert got["from"] == [udp["nat_ip"]], got
    # the meter this guards let ~100/s + its burst through (issue 42: 897 of 8,000); at full rate
    # nearly all arrive, less what a loaded machine's userspace switches and the counter drop
    assert got["received"] >= 0.6 * sent["sent"], (got, sent, c_err)
