"""A test bed for sFlow: a private Open vSwitch (own ovsdb-server and ovs-vswitchd in namespace
``<name>-ovs``, never the shared one) with one userspace bridge ``br0`` forwarding NORMAL, and three
host namespaces on it: ``a`` (10.9.0.1) and ``b`` (10.9.0.2) inside the prefix the detector watches,
``c`` (10.8.0.3) and ``d`` (10.8.0.4), same segment, outside it. The collector runs inside the OVS namespace,
where the switch's sFlow datagrams go to 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
HOSTS = {"a": "10.9.0.1/8", "b": "10.9.0.2/8", "c": "10.8.0.3/8", "d": "10.8.0.4/8"}
OFFLOADS = ["tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"]


def run(*args: str, timeout: float = 20, check: bool = True, env: dict[str, str] | None = None) -> str:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=timeout, env=env).stdout


class SflowBed:
    """``start()`` builds it; ``stop()`` (in ``finally``) removes exactly what it built."""

    def __init__(self) -> None:
        self.name = f"vsf{os.getpid() % 100000}"
        self.ns = f"{self.name}-ovs"
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.db_sock = self.dir / "db.sock"
        self.env = {**os.environ, "OVS_RUNDIR": str(self.dir), "OVS_DBDIR": str(self.dir), "OVS_LOGDIR": str(self.dir)}
        self.namespaces = [self.ns, *(self.host_ns(h) for h in HOSTS)]

    def host_ns(self, host: str) -> str:
        return f"{self.name}-{host}"

    def ip(self, host: str) -> str:
        return HOSTS[host].split("/")[0]

    def in_ns(self, ns: str, *args: str, **kw: object) -> str:
        return run("ip", "netns", "exec", ns, *args, **kw)  # type: ignore[arg-type]

    def vsctl(self, *args: str) -> str:
        return run("ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=10", *args, env=self.env)

    def vsctl_argv(self) -> list[str]:
        """The ovs-vsctl command line that reaches this bed's database (for switchconfig)."""
        return ["ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=10"]

    def start(self) -> SflowBed:
        for ns in self.namespaces:
            run("ip", "netns", "add", ns)
            self.in_ns(ns, "ip", "link", "set", "lo", "up")
        run("ovsdb-tool", "create", str(self.dir / "conf.db"), SCHEMA, env=self.env)
        common = [f"--unixctl={self.dir}/%s.ctl", f"--log-file={self.dir}/%s.log", "--detach"]
        self.in_ns(
            self.ns,
            "ovsdb-server",
            str(self.dir / "conf.db"),
            f"--remote=punix:{self.db_sock}",
            f"--pidfile={self.dir}/ovsdb-server.pid",
            *(c % "ovsdb-server" if "%s" in c else c for c in common),
            env=self.env,
        )
        self.vsctl("--no-wait", "init")
        self.in_ns(
            self.ns,
            "ovs-vswitchd",
            f"unix:{self.db_sock}",
            f"--pidfile={self.dir}/ovs-vswitchd.pid",
            *(c % "ovs-vswitchd" if "%s" in c else c for c in common),
            env=self.env,
            timeout=30,
        )
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail_mode=standalone")
        for host, addr in HOSTS.items():
            port, ns = f"br0{host}", self.host_ns(host)
            run("ip", "link", "add", port, "netns", self.ns, "type", "veth", "peer", "name", "eth0", "netns", ns)
            for n, ifname in ((self.ns, port), (ns, "eth0")):
                self.in_ns(n, "ethtool", "-K", ifname, *OFFLOADS, check=False)
                self.in_ns(n, "ip", "link", "set", ifname, "up")
            self.in_ns(ns, "ip", "addr", "add", addr, "dev", "eth0")
            self.vsctl("add-port", "br0", port)
        # the agent address the switch reports: an address of the OVS namespace
        self.in_ns(self.ns, "ip", "addr", "add", "127.0.0.2/8", "dev", "lo")
        return self

    def _pid(self, daemon: str) -> int | None:
        try:
            return int((self.dir / f"{daemon}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pid = self._pid(daemon)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.05)
        for ns in self.namespaces:
            run("ip", "netns", "del", ns, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
