"""A host's ``cpu_cores`` in the real lab: every process the lab runs in it shares that CPU.

The desktop gets 0.2 cores; busy loops started every way the lab starts processes in a host
(``popen``, as iperf3 and rclone are; the shell's ``cmd``; a child forking children, the way a
tool could try to outrun a per-process limit) get about 0.2 cores in all, while the same loop
in the unlimited server gets what the machine has free. No controller: the switches are not
needed to burn CPU.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO
from viplanes.lab.net import build_network
from viplanes.topologies.loader import load_topology

pytestmark = pytest.mark.integration

CORES = 0.1
SECONDS = 1.5
# spins for SECONDS of wall time, then prints the CPU seconds it got (one line: the shell takes it)
BURN = (
    f"import os, time; end = time.monotonic() + {SECONDS}; "
    "any(time.monotonic() > end for _ in iter(int, 1)); t = os.times(); print(t.user + t.system)"
)


def _popen_share(host: object, argv: list[str]) -> float:
    """CPU seconds over the wall time they took, start-up included: a throttled interpreter's
    start-up stretches the run past SECONDS (dividing by SECONDS read 0.18 of a 0.1 limit)."""
    t0 = time.monotonic()
    proc = host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # type: ignore[attr-defined]
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    return sum(float(x) for x in out.split()) / (time.monotonic() - t0)


def test_limited_host_gets_its_cores_however_it_starts_processes() -> None:
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    hosts = tuple(dataclasses.replace(h, cpu_cores=CORES) if h.name == "desktop" else h for h in topo.hosts)
    topo = dataclasses.replace(topo, hosts=hosts)
    with build_network(topo, "127.0.0.1", 1, wait_connected=0, shape=False, tls=False) as lab:
        desktop, server = lab.host("desktop"), lab.host("server")
        py = sys.executable
        one = _popen_share(desktop, [py, "-c", BURN])
        # two loops forked from one shell: together, not each, they get the quota
        forked = _popen_share(desktop, ["sh", "-c", f'"{py}" -c "$0" & "{py}" -c "$0"; wait', BURN])
        t0 = time.monotonic()
        shell = sum(float(x) for x in desktop.cmd(f"{py} -c '{BURN}'").split()) / (time.monotonic() - t0)
        free = _popen_share(server, [py, "-c", BURN])
        print(f"cpu share (cores): popen {one:.2f}, two forked {forked:.2f}, shell {shell:.2f}, unlimited {free:.2f}")
        for share in (one, forked, shell):
            assert share <= CORES * 1.5, f"the limited desktop got {share:.2f} cores (limit {CORES})"
        assert free >= 2 * CORES, f"the unlimited server got only {free:.2f} cores: machine too busy to tell"
        limit = desktop.cpu_limit
        assert limit is not None and limit.path.is_dir()
    assert not limit.path.exists(), "the host's group outlived the lab"


KILLED = textwrap.dedent("""
    import dataclasses, sys, time
    from viplanes.topologies.loader import load_topology
    from viplanes.lab.net import build_network
    topo = load_topology(sys.argv[1])
    hosts = tuple(dataclasses.replace(h, cpu_cores=0.5) if h.name == "desktop" else h for h in topo.hosts)
    lab = build_network(dataclasses.replace(topo, hosts=hosts), "127.0.0.1", 1, wait_connected=0,
                        shape=False, tls=False)
    print(lab.host("desktop").cpu_limit.path, flush=True)
    time.sleep(120)
""")


def test_a_killed_runs_group_is_removed_by_the_stale_cleaner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 leaves the desktop's group (its shell still in it): `clean_stale` removes it."""
    from viplanes.lab import net

    monkeypatch.setattr(net, "RUN_DIR", tmp_path)
    env = {**os.environ, "VIPLANES_LAB_RUN_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(REPO / "topologies/campus.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert line, proc.stderr.read()  # type: ignore[union-attr]
        group = Path(line)
        assert group.is_dir() and (group / "cgroup.procs").read_text().split(), "the shell is in the group"
        proc.kill()
        proc.wait()
        assert group.is_dir(), "kill -9 gives the run no chance to remove it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    removed = net.clean_stale()
    assert str(group) in removed and not group.exists() and not group.parent.exists()
