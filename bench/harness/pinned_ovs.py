"""A private ovs-vswitchd on core 1 and the bench (with the serve it starts) on core 0.

Why: on two shared cores, serve's CPU per activation grew with the switch count only because the
shared ovs-vswitchd (busier with 140 bridges) ran on the same cores and inflated serve's CPU time
(issue 13's control run with unconnected decoy bridges). ``BENCH_PINNED=1`` runs the switches
benchmark against this private OVS so the two no longer take turns on one core.

The private daemons have their own database, rundir, pidfiles and unix sockets and live in their
own network namespace (the userspace datapath opens a tap named ``ovs-netdev``, which must not
meet the shared daemon's). The machine's shared ovs-vswitchd is never touched or re-pinned.
While the context is open, ``OVS_RUNDIR`` points at the private rundir, so every ``ovs-vsctl`` /
``ovs-ofctl`` of the bench (bench/harness/ovs.py, the lab PKI's ``set-ssl``) and ``vswitchd_pid`` talk
to the private daemons. The bridges reach serve over one veth pair (root side ``169.254.X.1``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
SERVE_CORE = 0
OVS_CORE = 1
_OVS_ENV = ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR")


def enabled() -> bool:
    return os.environ.get("BENCH_PINNED", "") not in ("", "0")


def _run(*args: str, timeout: float = 30.0, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:6])}: {out.stderr.strip()}")
    return out.stdout


@dataclass
class PinnedOvs:
    """What the benchmark needs to know: where serve must listen for the bridges."""

    controller_ip: str
    rundir: Path
    namespace: str


def _pid(rundir: Path, daemon: str) -> int | None:
    try:
        return int((rundir / f"{daemon}.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


@contextlib.contextmanager
def pinned_ovs() -> Iterator[PinnedOvs]:
    """Start the private OVS (core 1), pin this process (core 0); undo both on exit."""
    name = f"vpo{os.getpid() % 100000}"
    ns, veth = f"{name}-ovs", f"{name}c"
    octet = os.getpid() % 250 + 1
    ctl_ip, sw_ip = f"169.254.{octet}.1", f"169.254.{octet}.2"
    rundir = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    saved_env = {k: os.environ.get(k) for k in _OVS_ENV}
    saved_affinity = os.sched_getaffinity(0)
    pin = ["taskset", "-c", str(OVS_CORE), "ip", "netns", "exec", ns]
    try:
        _run("ip", "netns", "add", ns)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "ctl0", "netns", ns)
        _run("ip", "addr", "add", f"{ctl_ip}/30", "dev", veth)
        _run("ip", "link", "set", veth, "up")
        _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{sw_ip}/30", "dev", "ctl0")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "ctl0", "up")
        # the daemons too: ovs-vswitchd puts each bridge's <br>.mgmt socket in its rundir
        env = {**os.environ, **{k: str(rundir) for k in _OVS_ENV}}
        db, sock = rundir / "conf.db", rundir / "db.sock"
        _run("ovsdb-tool", "create", str(db), SCHEMA)
        _run(
            *pin,
            "ovsdb-server",
            str(db),
            f"--remote=punix:{sock}",
            f"--pidfile={rundir}/ovsdb-server.pid",
            f"--unixctl={rundir}/ovsdb-server.ctl",
            f"--log-file={rundir}/ovsdb-server.log",
            "--detach",
            env=env,
        )
        _run("ovs-vsctl", f"--db=unix:{sock}", "--no-wait", "init")
        _run(
            *pin,
            "ovs-vswitchd",
            f"unix:{sock}",
            f"--pidfile={rundir}/ovs-vswitchd.pid",
            f"--unixctl={rundir}/ovs-vswitchd.ctl",
            f"--log-file={rundir}/ovs-vswitchd.log",
            "--detach",
            env=env,
        )
        for k in _OVS_ENV:
            os.environ[k] = str(rundir)
        _run("ovs-vsctl", "--timeout=10", "show")  # the private daemons answer
        os.sched_setaffinity(0, {SERVE_CORE})  # serve and its restarts inherit core 0
        yield PinnedOvs(ctl_ip, rundir, ns)
    finally:
        os.sched_setaffinity(0, saved_affinity)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pid = _pid(rundir, daemon)
            if pid is not None:
                _kill(pid)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        if not os.environ.get("BENCH_KEEP_WORKDIR"):
            shutil.rmtree(rundir, ignore_errors=True)


def affinity(pid: int) -> str:
    """The CPU list a process may run on (for the report: was the pinning in force?)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"
