"""Build any `Topology` in Mininet, connected to a remote OpenFlow controller, and tear it down.

Usage (as root; OVS daemons up: ``scripts/ovs-up``)::

    from viplanes.topologies.loader import load_topology
    from viplanes.lab.net import build_network

    topo = load_topology("topologies/campus.yaml")
    with build_network(topo, "127.0.0.1", 6653) as lab:   # starts switches, waits for controller
        desktop = lab.host("desktop")                     # Mininet node, by YAML name
        print(desktop.cmd("ping -c1 203.0.113.10"))
        lab.switch("s1")                                  # the OVSSwitch for YAML switch s1
        lab.bridge("s1")                                  # its bridge name, e.g. "vl3fa2s1"
        lab.net                                           # the mininet.net.Mininet itself
    # leaving the block (also on exception / Ctrl-C / SIGTERM / exit) removes exactly our
    # bridges, veths, namespaces and processes; ``lab.stop()`` is idempotent.

``build_network(topo, controller_host, controller_port, run_id=None, shape=True,
wait_connected=15.0, tls=True)``: ``shape=False`` skips link rates and the firewall cap (faster
tests); ``wait_connected=0`` does not wait for the switches to reach the controller. The switches
connect with ``ssl:HOST:PORT`` using the machine-wide lab PKI (``labpki``): the controller must run
with ``LabPKI.serve_args()``; ``tls=False`` (``tcp:``) only for a controller that deliberately
runs ``--insecure-tcp``.
``python -m viplanes.lab.net clean`` removes bridges of runs whose process died.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Node, OVSSwitch, RemoteController

from viplanes.settings.environ import one_setting
from viplanes.topologies.model import Topology

from . import cpulimit
from .labpki import ensure_lab_pki
from .topo import LabTopo

RUN_DIR = Path(one_setting("VIPLANES_LAB_RUN_DIR"))
PREFIX = "vl"


def new_run_id() -> str:
    """Four hex digits not used by a registered run or an existing bridge."""
    existing = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    for _ in range(100):
        run_id = secrets.token_hex(2)
        if not _registry_path(run_id).exists() and f"{PREFIX}{run_id}" not in existing:
            return run_id
    raise RuntimeError("no free lab run id (too many stale runs? viplanes lab clean)")


@dataclass
class LabNetwork:
    """A running lab: the Mininet object plus lookups by topology name and a safe teardown."""

    topology: Topology
    net: Mininet
    run_id: str
    names: dict[str, str]
    _cleanups: list[Callable[[], None]] = field(default_factory=list)
    _stopped: bool = False

    def host(self, name: str) -> Node:
        """A host, middlebox or router node by its topology name."""
        try:
            return self.net.get(self.names[name])
        except KeyError:
            raise KeyError(f"no node {name!r} in topology {self.topology.name}") from None

    def switch(self, name: str) -> OVSSwitch:
        return self.host(name)

    def bridge(self, name: str) -> str:
        """The OVS bridge name of a topology switch (prefixed with this run's id)."""
        return self.names[name]

    def on_stop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` at teardown, before the network goes (last registered runs first)."""
        self._cleanups.append(fn)

    def track_pid(self, pid: int) -> None:
        """Remember a process we started so a stale-run cleanup can find it if we crash."""
        _registry_add(self.run_id, pids=[pid])

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        global _tearing_down
        _tearing_down += 1
        try:
            while self._cleanups:
                fn = self._cleanups.pop()
                try:
                    fn()
                except Exception as exc:  # teardown must go on
                    print(f"lab: cleanup failed: {exc}", file=sys.stderr)
            self.net.stop()
            for ctl in self.net.controllers:  # RemoteController.stop() does nothing: its shell lived on
                ctl.terminate()
        finally:
            _remove_leftovers(self.run_id, _registry_read(self.run_id))
            _registry_path(self.run_id).unlink(missing_ok=True)
            _LIVE.pop(self.run_id, None)
            _tearing_down -= 1

    def __enter__(self) -> LabNetwork:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


_LIVE: dict[str, LabNetwork] = {}


def build_network(
    topo: Topology,
    controller_host: str = "127.0.0.1",
    controller_port: int = 6653,
    *,
    run_id: str | None = None,
    shape: bool = True,
    wait_connected: float = 15.0,
    log_level: str = "warning",
    tls: bool = True,
) -> LabNetwork:
    """Create, start and return the lab network; on any failure everything made is removed."""
    if os.geteuid() != 0:
        raise PermissionError("the lab needs root (network namespaces, OVS bridges)")
    if tls:
        ensure_lab_pki()  # the shared vswitchd presents the lab certificate on ssl: targets
    setLogLevel(log_level)
    _install_signal_handlers()
    run_id = run_id or new_run_id()
    prefix = f"{PREFIX}{run_id}"
    mn_topo = LabTopo(topology=topo, prefix=prefix, shape=shape)
    bridges = [mn_topo.names[s.name] for s in topo.switches]
    _registry_add(run_id, owner=os.getpid(), bridges=bridges)
    Mininet.inited = True  # Mininet.init() would raise machine-wide sysctls (fixLimits)
    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False, autoStaticArp=False, waitConnected=False)
    lab = LabNetwork(topo, net, run_id, dict(mn_topo.names))
    _LIVE[run_id] = lab
    try:
        net.addController(
            f"{prefix}c0",
            controller=RemoteController,
            ip=controller_host,
            port=controller_port,
            protocol="ssl" if tls else "tcp",
        )
        net.topo = mn_topo
        net.build()
        _registry_add(run_id, pids=[n.pid for n in net.hosts if n.pid])
        net.start()
        for sw in net.switches:
            sw.quiet_ports()  # Mininet's batch start re-applies tc; offloads stay off
        if wait_connected:
            _wait_connected(net.switches, wait_connected)
    except BaseException:
        lab.stop()
        raise
    return lab


def _wait_connected(switches: list[OVSSwitch], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(switches)
    while pending and time.monotonic() < deadline:
        pending = [sw for sw in pending if not sw.connected()]
        if pending:
            time.sleep(0.2)
    if pending:
        names = ", ".join(sw.name for sw in pending)
        raise RuntimeError(f"switches {names} did not connect to the controller within {timeout:.0f}s")


# --- teardown on signals and exit -------------------------------------------------------------

_handlers_installed = False


def _stop_all() -> None:
    for lab in list(_LIVE.values()):
        lab.stop()


_tearing_down = 0


def _on_signal(signum: int, _frame: Any) -> None:
    # Raise into the main thread so `with`/`finally` blocks unwind and stop the network; a
    # signal during teardown is ignored so that the teardown itself is never cut short.
    if not _tearing_down:
        raise KeyboardInterrupt(f"signal {signum}")


def _install_signal_handlers() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler, None):
                signal.signal(sig, _on_signal)


# --- run registry and stale-run cleanup -------------------------------------------------------


def _registry_path(run_id: str) -> Path:
    return RUN_DIR / f"{run_id}.json"


def _registry_read(run_id: str) -> dict[str, Any]:
    try:
        return json.loads(_registry_path(run_id).read_text())
    except (OSError, ValueError):
        return {}


def _registry_add(
    run_id: str, owner: int | None = None, bridges: list[str] | None = None, pids: list[int] | None = None
) -> None:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    data = _registry_read(run_id)
    if owner is not None:
        data["owner"] = owner
    data["bridges"] = sorted(set(data.get("bridges", [])) | set(bridges or []))
    data["pids"] = sorted(set(data.get("pids", [])) | set(pids or []))
    _registry_path(run_id).write_text(json.dumps(data))


OURS = ("mininet:", "mnexec", "iperf3", "rclone")


def _ours(pid: int) -> bool:
    """Guard against pid reuse: only processes that look like lab shells or lab services."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return any(word in cmdline for word in OURS)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_leftovers(run_id: str, data: dict[str, Any]) -> list[str]:
    """Remove what a run may have left: its bridges, its ports, its processes. Returns names."""
    removed = []
    for pid in data.get("pids", []):
        if pid != os.getpid() and _alive(pid) and _ours(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                removed.append(f"pid {pid}")
            except OSError:
                pass
    prefix = f"{PREFIX}{run_id}"
    existing = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    for br in existing.split():
        if br.startswith(prefix):
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", br], capture_output=True)
            removed.append(br)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(prefix):
            subprocess.run(["ip", "link", "del", name], capture_output=True)
            removed.append(name)
    for group in cpulimit.run_groups(Path("/proc/self/mounts").read_text(), prefix):
        if cpulimit.remove(group, wait=0.5):  # its processes were killed above
            removed.append(str(group))
    return removed


def clean_stale() -> list[str]:
    """Remove leftovers of lab runs whose owning process is gone (never a live run's)."""
    removed: list[str] = []
    if not RUN_DIR.is_dir():
        return removed
    for path in sorted(RUN_DIR.glob("*.json")):
        run_id = path.stem
        data = _registry_read(run_id)
        owner = data.get("owner")
        if owner and _alive(owner):
            continue
        removed += _remove_leftovers(run_id, data)
        path.unlink(missing_ok=True)
    return removed


if __name__ == "__main__":
    if sys.argv[1:] == ["clean"]:
        print("\n".join(clean_stale()) or "nothing stale")
    else:
        print("usage: python -m viplanes.lab.net clean", file=sys.stderr)
        sys.exit(2)
