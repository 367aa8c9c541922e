"""Issue 32's takeover lab, continued: the mark that proves a NAT mapping, and rclone.

The lab of test_nat_takeover_lab.py (a real `viplanes serve`, sFlow 1 in 8 at s1 and s3, a
desktop grant allowing automatic lanes at 8 Mbit/s: tests/support/sflowlanes.py). The abuse: the
desktop and the server, both behind the NAT, upload to the same cloud port at the same rate, and
forged samples pair the desktop's connection with the server's NAT port. The count-only watches
counted alike there and the forged lane cut the desktop's upload; the watches now prove a mapping
with a DSCP nonce the access switch sets (controller/compile/watch.py), so the server's packets
count 0 of it: no lane (``nat_unconfirmed``), both uploads whole, no nonce at the cloud. And the
issue's own words: an rclone upload to an S3 endpoint, with no lane request, is laned by itself
and its rate jumps. Numbers: docs/automatic-lanes.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from tests.support.natlab import FIREWALL_MBPS, MARKS, NAT_BOX, SLACK_S, TAKEOVER_S, nat_lab, outcomes
from tests.support.sflowgen import datagram, flow_sample, send
from tests.support.sflowlanes import CLOUD, DESKTOP, SflowLab, port_ifindex, stop_all, timestamp
from viplanes.lab.services import clean_env, rclone_binary

pytestmark = MARKS


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SflowLab]:
    yield from nat_lab(tmp_path_factory, "natproof")


TWO_SINK = """
import hashlib, json, socket, sys, threading
srv = socket.create_server(("0.0.0.0", int(sys.argv[1])))
got = {}

def drain(conn, port):
    h, n = hashlib.sha256(), 0
    while chunk := conn.recv(1 << 16):
        h.update(chunk)
        n += len(chunk)
    got[port] = [n, h.hexdigest()]

threads = []
for _ in range(2):
    conn, (_, port) = srv.accept()
    conn.settimeout(20)
    threads.append(threading.Thread(target=drain, args=(conn, port)))
    threads[-1].start()
for t in threads:
    t.join()
print(json.dumps(got), flush=True)
"""
PACED = """
import hashlib, random, socket, sys, time
cport, rate_bps, seconds = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
data = random.Random(cport).randbytes(int(rate_bps * seconds / 8))
s = socket.socket()
s.bind(("0.0.0.0", cport))
s.settimeout(10)
s.connect((sys.argv[1], 5208))
step, t0 = 8192, time.monotonic()
try:
    for i in range(0, len(data), step):
        time.sleep(max(0.0, t0 + i * 8 / rate_bps - time.monotonic()))
        s.sendall(data[i : i + step])
    s.close()
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)
except OSError as e:
    print("failed", type(e).__name__, flush=True)
"""


MARKED_AT_CLOUD = "INPUT -p tcp --dport 5208 -m dscp ! --dscp 0"


@pytest.fixture
def cloud_counts_marked_packets(lab: SflowLab) -> Iterator[None]:
    """An iptables rule at the cloud counting arriving packets to port 5208 whose DSCP is not 0:
    a nonce that left the campus would show there (``marked_at_cloud``)."""
    cloud = lab.net.host("cloud")
    cloud.cmd(f"iptables -I {MARKED_AT_CLOUD}")
    try:
        yield
    finally:
        cloud.cmd(f"iptables -D {MARKED_AT_CLOUD}")


def marked_at_cloud(lab: SflowLab) -> int:
    line = lab.net.host("cloud").cmd("iptables -L INPUT -v -x -n | grep 'dpt:5208'").split()
    return int(line[0]) if line else -1


def cloud_peers(lab: SflowLab) -> set[str]:
    """The NAT box's address:port of each connection the cloud has on port 5208."""
    out = lab.net.host("cloud").cmd("ss -tnH state established '( sport = :5208 )'").split()
    return {word for word in out if word.startswith(f"{NAT_BOX}:")}


@pytest.mark.usefixtures("cloud_counts_marked_packets")
def test_a_forged_pairing_with_another_connections_mapping_is_refused(lab: SflowLab) -> None:
    """The hole the DSCP nonce closes: the desktop (A) and the server (B), both behind the NAT,
    upload to the cloud's port 5208 at the same 4 Mbit/s. Forged samples claim A's connection
    leaves the NAT from B's NAT port. The count-only watches counted alike there and A's lane was
    rewritten to B's port (both transfers cut); now the border counts 0 packets carrying A's
    nonce on B's tuple and A's marked packets come out by A's own port: ``nat_unconfirmed``,
    and the sweep put their DSCP back (the cloud counts no marked packet)."""
    host, port = os.environ["VIPLANES_SFLOW_LISTEN"].rsplit(":", 1)
    nat, cloud = lab.net.host("nat"), lab.net.host("cloud")
    masq = f"POSTROUTING -p tcp --dport 5208 -o {nat.outside_intf} -j MASQUERADE --to-ports 51000-51999"
    nat.cmd(f"iptables -t nat -I {masq}")
    before = outcomes(lab).get("nat_unconfirmed", 0)
    sink = cloud.popen(["python3", "-c", TWO_SINK, "5208"], stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    sources: list[subprocess.Popen] = []

    def source(name: str, cport: int, known: set[str]) -> set[str]:
        """Start one upload; the NAT's address:port the cloud sees for it."""
        argv = ["python3", "-c", PACED, CLOUD, str(cport), "4e6", "4"]
        sources.append(lab.net.host(name).popen(argv, stdout=subprocess.PIPE, text=True))
        for _ in range(60):
            if new := cloud_peers(lab) - known:
                return new
            time.sleep(0.05)
        return set()

    try:
        for _ in range(60):
            if ":5208 " in cloud.cmd("ss -ltn"):
                break
            time.sleep(0.05)
        a_peers = source("desktop", 42400, cloud_peers(lab))
        (b_peer,) = source("server", 42500, a_peers | cloud_peers(lab))
        b_port = int(b_peer.rsplit(":", 1)[1])

        at_desktop, at_nat = port_ifindex(1, 1), port_ifindex(3, 1)  # real ports: only the watch can tell

        def forge() -> None:
            seq = 1
            while not stop.is_set():
                pre = [flow_sample(DESKTOP, CLOUD, 42400, 5208, 64, seq=seq + i, in_if=at_desktop) for i in range(20)]
                post = [
                    flow_sample(NAT_BOX, CLOUD, b_port, 5208, 64, seq=seq + 20 + i, in_if=at_nat) for i in range(20)
                ]
                send((host, int(port)), datagram("127.0.0.1", pre + post, seq=seq))
                seq += 40
                stop.wait(0.1)

        forger = threading.Thread(target=forge, daemon=True)
        forger.start()
        sent = [p.communicate(timeout=30)[0].split() for p in sources]
        got = json.loads(sink.communicate(timeout=25)[0] or "{}")
    finally:
        stop.set()
        nat.cmd(f"iptables -t nat -D {masq}")
        stop_all([sink, *sources])
    time.sleep(0.3)
    after, marked = outcomes(lab), marked_at_cloud(lab)
    lanes = [x for x in lab.lanes() if x["dst_port"] == 5208]
    print(f"\nB's NAT port {b_port}; sent {sent}; received {got}; marked at the cloud {marked}")
    print(f"outcomes {after}; lanes {[(x['id'], x['trigger']) for x in lanes]}")
    refusals = [line for line in lab.serve.log.read_text().splitlines() if f"{NAT_BOX}:{b_port} for" in line]
    print("\n".join(refusals[-2:]))
    assert lanes == [], lanes
    assert after.get("nat_unconfirmed", 0) > before, after
    assert sorted((n, h) for n, h in got.values()) == sorted((int(n), h) for n, h in sent), (sent, got)  # both whole
    assert [int(n) for n, _ in sent] == [2_000_000, 2_000_000], sent
    assert marked == 0  # no nonce left the campus


@pytest.fixture
def s3_in_the_grant(lab: SflowLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`rclone serve s3` on the cloud at port 5209 (inside the automatic grant's 5201-5299; the
    lab's own endpoint at 9000 is not): the bucket's directory, read back after the upload."""
    root = tmp_path_factory.mktemp("s3")
    (root / "lab").mkdir()
    argv = [rclone_binary(), "serve", "s3", "--addr", f"{CLOUD}:5209", "--auth-key", "lab,lab-secret", str(root)]
    cloud = lab.net.host("cloud")
    proc = cloud.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env())
    try:
        for _ in range(100):
            if ":5209 " in cloud.cmd("ss -ltn"):
                break
            time.sleep(0.05)
        yield root / "lab"
    finally:
        stop_all([proc])


def rclone_progress(stderr: str) -> list[tuple[float, int]]:
    """(elapsed s, bytes) of each stats record of an rclone ``--use-json-log -v`` run."""
    out = []
    for line in stderr.splitlines():
        try:
            stats = json.loads(line).get("stats")
        except ValueError:
            continue
        if isinstance(stats, dict):
            out.append((float(stats["elapsedTime"]), int(stats["bytes"])))
    return out


def test_an_rclone_upload_with_no_lane_request_is_laned_by_itself(lab: SflowLab, s3_in_the_grant: Path) -> None:
    """Issue 32's words: an rclone upload started on the desktop with no lane request becomes
    laned by itself (a takeover: its connection is already NAT'd) and its rate jumps to the
    lane's; the object arrives whole (size and SHA-256)."""
    size = 24 << 20
    data = random.Random(32).randbytes(size)
    src = s3_in_the_grant.parent / "upload.bin"
    src.write_bytes(data)
    env = clean_env(
        {
            "RCLONE_CONFIG": "/dev/null",
            "RCLONE_CONFIG_CLOUD_TYPE": "s3",
            "RCLONE_CONFIG_CLOUD_PROVIDER": "Rclone",
            "RCLONE_CONFIG_CLOUD_ACCESS_KEY_ID": "lab",
            "RCLONE_CONFIG_CLOUD_SECRET_ACCESS_KEY": "lab-secret",
            "RCLONE_CONFIG_CLOUD_ENDPOINT": f"http://{CLOUD}:5209",
            "RCLONE_CONFIG_CLOUD_FORCE_PATH_STYLE": "true",
        }
    )
    argv = [rclone_binary(), "copyto", str(src), "cloud:lab/upload.bin", "--use-json-log", "-v", "--stats", "250ms"]
    argv += ["--s3-upload-cutoff", "64M", "--retries", "1", "--low-level-retries", "1"]  # one PUT: one connection
    started = time.time()
    rclone = lab.net.host("desktop").popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lane = lab.lane_of(5209, timeout=8)
    stderr = rclone.communicate(timeout=45)[1]
    took_all = time.time() - started
    progress = rclone_progress(stderr)
    arrived = (s3_in_the_grant / "upload.bin").read_bytes() if (s3_in_the_grant / "upload.bin").exists() else b""
    assert lane is not None, f"no lane within 8 s: {outcomes(lab)}"
    took = timestamp(lane["activated_at"]) - started
    slopes = [(t1, (b1 - b0) * 8 / (t1 - t0) / 1e6) for (t0, b0), (t1, b1) in pairwise(progress) if t1 > t0]
    before = [r for t, r in slopes if 0 < t <= took and r > 0]
    after = [r for t, r in slopes if t >= took + 0.5 and r > 0]
    print(f"\nrclone start -> takeover lane active {took * 1000:.0f} ms; trigger {lane['trigger']}")
    print(f"rclone Mbit/s per 0.25 s before the lane {[round(r, 1) for r in before]}")
    print(f"after it {[round(r, 1) for r in after]}; {size} B in {took_all:.1f} s, exit {rclone.returncode}")
    assert rclone.returncode == 0, stderr[-600:]
    assert len(arrived) == size and hashlib.sha256(arrived).digest() == hashlib.sha256(data).digest()
    assert lane["trigger"]["kind"] == "sflow" and lane["trigger"]["nat_address"] == NAT_BOX, lane
    assert took < TAKEOVER_S + SLACK_S, took  # SLACK_S: tests/support/natlab.py
    assert before and after and statistics.median(after) > max(FIREWALL_MBPS, 1.5 * statistics.median(before))
