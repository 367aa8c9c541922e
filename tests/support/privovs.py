"""Private Open vSwitch beds: an ovs-vswitchd of the test's own in its own network namespace,
with hosts as namespaces. The one bed (``OvsBed``) and its two layouts: the campus lane path
(``PrivateOvs``, the fault and admission tests) and one sFlow bridge (``SflowBed``).

Killing or restarting a bed's ovs-vswitchd never touches the machine's shared one: it has its own
ovsdb-server, database file, rundir, pidfiles and unix sockets (``OVS_RUNDIR``/``OVS_DBDIR`` and
``--db=unix:...``), and lives in namespace ``<name>-ovs``; ``<name>`` carries the run's tag
(tests/support/runtag), so two runs at once never share a namespace, link or address. Veth pairs
are made directly inside the namespaces (no name in the root namespace but a controller link).

``PrivateOvs``: userspace (netdev) bridges s1..s4 carry the campus dpids and ports. The switches
reach the controller over one veth pair ``<name>c`` (root side ``169.254.X.1``, OVS side ``.2``).
Only what the lane path needs exists: desktop (s1:1), edge router (s3:2 inside, s4:1 outside)
and cloud (s4:2); the firewall and NAT are absent, so traffic moves only over a lane. The desktop
knows its gateway's MAC statically (no firewall to answer its ARP); the edge router must ARP for
the lane's pool address like in the lab (answered by the controller, or by switch flows).

``SflowBed``: one bridge ``br0`` forwarding NORMAL, and four host namespaces on it: ``a``
(10.9.0.1) and ``b`` (10.9.0.2) inside the prefix the detector watches, ``c`` (10.8.0.3) and ``d``
(10.8.0.4), same segment, outside it. The collector runs inside the OVS namespace, where the
switch's sFlow datagrams go to 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.runtag import ifname, link_octet
from viplanes.lab.labpki import ensure_lab_pki

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
# switch ports of the campus: (bridge, port) -> (namespace suffix, interface in it, MAC, address)
HOST_PORTS = {
    ("s1", 1): ("desktop", "eth0", "02:00:00:01:00:10", "10.1.0.10/24"),
    ("s3", 2): ("edge", "inside", "02:00:00:03:00:01", "198.51.100.1/24"),
    ("s4", 1): ("edge", "outside", "02:00:00:04:00:01", "203.0.113.1/24"),
    ("s4", 2): ("cloud", "eth0", "02:00:00:04:00:10", "203.0.113.10/24"),
}
LINKS = [(("s1", 3), ("s2", 1)), (("s2", 3), ("s3", 3))]
DPIDS = {"s1": 1, "s2": 2, "s3": 3, "s4": 4}
OFFLOADS = ["tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"]


def run(
    *args: str,
    timeout: float = 20,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=timeout, env=env)


class OvsBed:
    """The private daemons and namespaces; ``start_daemons()`` builds them, ``stop()`` (in
    ``finally``) removes exactly what was built. Layouts add bridges and hosts."""

    def __init__(self, name: str, hosts: tuple[str, ...]) -> None:
        self.name = name
        self.ns = f"{self.name}-ovs"
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.db_sock = self.dir / "db.sock"
        self.env = {**os.environ, "OVS_RUNDIR": str(self.dir), "OVS_DBDIR": str(self.dir), "OVS_LOGDIR": str(self.dir)}
        self.namespaces = [self.ns, *(self.host_ns(h) for h in hosts)]
        self.links: list[str] = []  # root-namespace interfaces this bed made

    # ---- plumbing --------------------------------------------------------------------------
    def host_ns(self, host: str) -> str:
        return f"{self.name}-{host}"

    def in_ns(self, ns: str, *args: str, check: bool = True, timeout: float = 20) -> str:
        return run("ip", "netns", "exec", ns, *args, check=check, timeout=timeout, env=self.env).stdout

    def vsctl_argv(self) -> list[str]:
        """The ovs-vsctl command line that reaches this bed's database (for switchconfig)."""
        return ["ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=10"]

    def vsctl(self, *args: str) -> str:
        return run(*self.vsctl_argv(), *args, env=self.env).stdout

    def ofctl(self, *args: str) -> str:
        return run("ovs-ofctl", "-O", "OpenFlow13", *args, env=self.env).stdout

    def _pid(self, daemon: str) -> int | None:
        try:
            return int((self.dir / f"{daemon}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def veth(self, ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
        run("ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b)
        for ns, name in ((ns_a, if_a), (ns_b, if_b)):
            self.in_ns(ns, "ethtool", "-K", name, *OFFLOADS, check=False)
            self.in_ns(ns, "ip", "link", "set", name, "up")

    # ---- life ------------------------------------------------------------------------------
    def start_daemons(self) -> None:
        for ns in self.namespaces:
            run("ip", "netns", "add", ns)
            self.in_ns(ns, "ip", "link", "set", "lo", "up")
        run("ovsdb-tool", "create", str(self.dir / "conf.db"), SCHEMA, env=self.env)
        self.in_ns(
            self.ns,
            "ovsdb-server",
            str(self.dir / "conf.db"),
            f"--remote=punix:{self.db_sock}",
            f"--pidfile={self.dir}/ovsdb-server.pid",
            f"--unixctl={self.dir}/ovsdb-server.ctl",
            f"--log-file={self.dir}/ovsdb-server.log",
            "--detach",
        )
        self.vsctl("--no-wait", "init")
        self.start_vswitchd()

    def start_vswitchd(self) -> None:
        self.in_ns(
            self.ns,
            "ovs-vswitchd",
            f"unix:{self.db_sock}",
            f"--pidfile={self.dir}/ovs-vswitchd.pid",
            f"--unixctl={self.dir}/ovs-vswitchd.ctl",
            f"--log-file={self.dir}/ovs-vswitchd.log",
            "--detach",
            timeout=30,
        )

    def kill_vswitchd(self) -> None:
        pid = self._pid("ovs-vswitchd")
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid)
            (self.dir / "ovs-vswitchd.pid").unlink(missing_ok=True)

    def stop(self) -> None:
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pid = self._pid(daemon)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                    _wait_gone(pid)
                except ProcessLookupError:
                    pass
        for ns in self.namespaces:
            run("ip", "netns", "del", ns, check=False)
        for link in self.links:
            run("ip", "link", "del", link, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateOvs(OvsBed):
    """The campus lane path; ``start(controller_port)`` builds it."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name or ifname("vlf", longest_suffix="c"), ("desktop", "edge", "cloud"))
        octet = link_octet()  # free now; taken when start() adds the address
        self.controller_ip, self.switch_ip = f"169.254.{octet}.1", f"169.254.{octet}.2"
        self.ctl_if = f"{self.name}c"
        # serve's options for OpenFlow over TLS with the lab PKI, known before start(): the serve
        # launcher takes them when it is made, which may be before the bed is built
        self.security_args: list[str] = ensure_lab_pki(configure_vswitchd=False).serve_args()

    def start(self, controller_port: int) -> PrivateOvs:
        self.start_daemons()
        run("ip", "link", "add", self.ctl_if, "type", "veth", "peer", "name", "ctl0", "netns", self.ns)
        self.links.append(self.ctl_if)
        run("ip", "addr", "add", f"{self.controller_ip}/30", "dev", self.ctl_if)
        run("ip", "link", "set", self.ctl_if, "up")
        self.in_ns(self.ns, "ip", "addr", "add", f"{self.switch_ip}/30", "dev", "ctl0")
        self.in_ns(self.ns, "ip", "link", "set", "ctl0", "up")
        self._build(controller_port)
        return self

    def _build(self, controller_port: int) -> None:
        # OpenFlow over TLS with the lab PKI, set on this private ovsdb only (the shared one
        # is never touched)
        lab = ensure_lab_pki(configure_vswitchd=False)
        self.vsctl("set-ssl", str(lab.vswitchd_key), str(lab.vswitchd_cert), str(lab.ca))
        target = f"ssl:{self.controller_ip}:{controller_port}"
        for br, dpid in DPIDS.items():
            self.vsctl(
                "add-br",
                br,
                "--",
                "set",
                "bridge",
                br,
                "datapath_type=netdev",
                f"other-config:datapath-id={dpid:016x}",
                "fail_mode=secure",
                "protocols=OpenFlow13",
            )
        for a, b in LINKS:
            self.veth(self.ns, f"{a[0]}p{a[1]}", self.ns, f"{b[0]}p{b[1]}")
            self._port(*a), self._port(*b)
        for (br, port), (host, dev, mac, addr) in HOST_PORTS.items():
            ns = self.host_ns(host)
            self.veth(self.ns, f"{br}p{port}", ns, dev)
            self._port(br, port)
            self.in_ns(ns, "ip", "link", "set", dev, "address", mac)
            self.in_ns(ns, "ip", "addr", "add", addr, "dev", dev)
        desktop, edge, cloud = (self.host_ns(h) for h in ("desktop", "edge", "cloud"))
        self.in_ns(desktop, "ip", "route", "add", "default", "via", "10.1.0.1")
        self.in_ns(
            desktop,
            "ip",
            "neigh",
            "replace",
            "10.1.0.1",
            "lladdr",
            "02:00:00:02:00:01",
            "dev",
            "eth0",
            "nud",
            "permanent",
        )
        self.in_ns(cloud, "ip", "route", "add", "default", "via", "203.0.113.1")
        self.in_ns(edge, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for br in DPIDS:
            self.vsctl("set-controller", br, target)
        for uuid in self.vsctl("--columns=_uuid", "--bare", "list", "Controller").split():
            self.vsctl("set", "Controller", uuid, "max_backoff=1000", "inactivity_probe=5000")

    def apply_max_backoff(self) -> None:
        """Make the Controller rows' ``max_backoff`` (1 s) hold; call once every switch is connected.

        ovs-vswitchd 3.1 creates a switch's outgoing connection with a fixed 8 s max backoff and
        applies the configured one only on a reconfiguration while that connection is up; any
        database change makes one. Without it each ``bridge/reconnect`` waits the full 8 s."""
        self.vsctl("set", "Open_vSwitch", ".", f"external_ids:vl-backoff={time.monotonic_ns()}")

    def quick_neighbours(self, host: str, reachable_ms: int = 2000, first_probe_s: int = 1) -> None:
        """Make ``host`` re-resolve its neighbours every 2-4 s instead of Linux's 15-45 s + 5 s, so
        a short controller outage still sees several ARP refreshes (each must be answered)."""
        ns = self.host_ns(host)
        for dev in (i for h, i, _, _ in HOST_PORTS.values() if h == host):
            self.in_ns(
                ns,
                "sysctl",
                "-qw",
                f"net.ipv4.neigh.{dev}.base_reachable_time_ms={reachable_ms}",
                f"net.ipv4.neigh.{dev}.delay_first_probe_time={first_probe_s}",
            )

    def _port(self, br: str, port: int) -> None:
        name = f"{br}p{port}"
        self.vsctl("add-port", br, name, "--", "set", "Interface", name, f"ofport_request={port}")

    # ---- what the tests read ---------------------------------------------------------------
    def cookies(self, br: str) -> set[int]:
        """Every cookie on a bridge's flows (one dump for hundreds of lanes)."""
        return {
            int(line.split("cookie=", 1)[1].split(",", 1)[0], 16)
            for line in self.ofctl("dump-flows", br).splitlines()
            if "cookie=" in line
        }

    def lane_flows(self, cookie: int) -> dict[str, list[dict[str, float]]]:
        """Per bridge, the flows with this cookie: their duration, packets, bytes and match text."""
        out: dict[str, list[dict[str, float]]] = {}
        for br in DPIDS:
            rows = []
            for line in self.ofctl("dump-flows", br, f"cookie={cookie:#x}/-1").splitlines():
                if "cookie=" not in line:
                    continue
                fields = dict(f.split("=", 1) for f in line.replace(",", " ").split() if "=" in f)
                rows.append(
                    {
                        "duration": float(fields["duration"].rstrip("s")),
                        "n_packets": int(fields["n_packets"]),
                        "n_bytes": int(fields["n_bytes"]),
                        "match": line.split("priority=", 1)[1].split(" actions")[0],
                    }
                )
            out[br] = sorted(rows, key=lambda r: str(r["match"]))
        return out


SFLOW_HOSTS = {"a": "10.9.0.1/8", "b": "10.9.0.2/8", "c": "10.8.0.3/8", "d": "10.8.0.4/8"}


class SflowBed(OvsBed):
    """One sFlow bridge ``br0`` and four hosts (module docstring); ``start()`` builds it."""

    def __init__(self) -> None:
        super().__init__(ifname("vsf"), tuple(SFLOW_HOSTS))

    def ip(self, host: str) -> str:
        return SFLOW_HOSTS[host].split("/")[0]

    def start(self) -> SflowBed:
        self.start_daemons()
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail_mode=standalone")
        for host, addr in SFLOW_HOSTS.items():
            port, ns = f"br0{host}", self.host_ns(host)
            self.veth(self.ns, port, ns, "eth0")
            self.in_ns(ns, "ip", "addr", "add", addr, "dev", "eth0")
            self.vsctl("add-port", "br0", port)
        # the agent address the switch reports: an address of the OVS namespace
        self.in_ns(self.ns, "ip", "addr", "add", "127.0.0.2/8", "dev", "lo")
        return self


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # our own child (not with --detach): reap it
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
