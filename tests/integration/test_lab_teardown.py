"""A lab interrupted by Ctrl-C or SIGTERM leaves no bridge, port, namespace shell or registry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.integration


SCRIPT = textwrap.dedent("""
    import sys, time
    from viplanes.topologies.loader import load_topology
    from viplanes.lab.net import build_network
    lab = build_network(load_topology(sys.argv[1]), "127.0.0.1", 1, wait_connected=0,
                        shape=False)
    with lab:
        pids = [str(lab.host(h.name).pid) for h in lab.topology.hosts]
        print(lab.run_id, " ".join(pids), flush=True)
        time.sleep(120)
""")


def _links() -> str:
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_lab_leaves_nothing(sig: int, tmp_path: Path) -> None:
    env = {**os.environ, "VIPLANES_LAB_RUN_DIR": str(tmp_path)}
    # Ctrl-C reaches a lab started from a terminal; when the test itself runs as a background
    # job of a non-interactive shell (`.ci/run &`), SIGINT is inherited as ignored and Python
    # then installs no KeyboardInterrupt handler: the child slept through the signal. The child
    # gets the terminal's default back, as a user's lab would have.
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(REPO / "topologies/campus.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = proc.stdout.readline().split()
        assert line, proc.stderr.read()
        run_id, pids = line[0], [int(p) for p in line[1:]]
        prefix = f"vl{run_id}"
        brs = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
        assert prefix in brs and prefix in _links()
        assert (tmp_path / f"{run_id}.json").exists()
        proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:  # say where the teardown hangs, then fail
            spy = REPO / ".venv" / "bin" / "py-spy"
            stack = (
                subprocess.run(
                    [str(spy), "dump", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=30
                ).stdout
                if spy.exists()
                else "(no py-spy)"
            )
            pytest.fail(f"lab still tearing down 30 s after signal {sig}:\n{stack}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.5)
    brs = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    assert prefix not in brs
    assert prefix not in _links()
    assert not (tmp_path / f"{run_id}.json").exists()
    for pid in pids:  # the hosts' shells (and with them their namespaces) are gone
        assert not Path(f"/proc/{pid}").exists() or b"mininet:" not in Path(f"/proc/{pid}/cmdline").read_bytes()


def test_killed_lab_is_removed_by_the_stale_cleaner(tmp_path: Path, monkeypatch) -> None:
    """kill -9 gives no chance to clean up: `clean_stale` removes exactly that run's remains."""
    from viplanes.lab import net

    monkeypatch.setattr(net, "RUN_DIR", tmp_path)
    env = {**os.environ, "VIPLANES_LAB_RUN_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(REPO / "topologies/campus.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline().split()
        assert line, proc.stderr.read()
        run_id, pids = line[0], [int(p) for p in line[1:]]
        proc.kill()
        proc.wait(10)
        prefix = f"vl{run_id}"
        brs = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
        assert prefix in brs  # left behind, as expected after SIGKILL
        removed = net.clean_stale()
        assert f"{prefix}s1" in removed
        brs = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
        assert prefix not in brs and prefix not in _links()
        assert not (tmp_path / f"{run_id}.json").exists()
        time.sleep(0.3)
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists() or b"mininet:" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        net.clean_stale()


def test_a_stopped_lab_leaves_no_controller_shell(tmp_path: Path, monkeypatch) -> None:
    """Mininet's RemoteController.stop() does nothing: each lab's controller shell lived on as an
    idle ``bash`` until the process that built it exited (one per lab, ~100 in a CI run)."""
    from tests.support.procs import wait_for
    from viplanes.lab import net as labnet
    from viplanes.topologies.loader import load_topology

    monkeypatch.setattr(labnet, "RUN_DIR", tmp_path)
    lab = labnet.build_network(
        load_topology(REPO / "topologies/campus.yaml"), "127.0.0.1", 1, wait_connected=0, shape=False
    )
    with lab:
        shells = [c.shell.pid for c in lab.net.controllers]
        assert shells and all(Path(f"/proc/{pid}").exists() for pid in shells)

    def gone() -> bool:
        return not any(
            Path(f"/proc/{pid}").exists() and b"mininet:" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in shells
        )

    assert wait_for(gone, 10), f"controller shells {shells} outlived the lab"
