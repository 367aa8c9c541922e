"""Userspace Open vSwitch bridges shaped like a topology's switches, for benchmarks.

No Mininet: each switch of the topology becomes a ``netdev`` bridge with the topology's dpid and
one internal port per port number the topology uses, so every flow the compiler emits has its
in_port and output. Names carry a per-run prefix; ``delete`` removes exactly these bridges.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from viplanes.topologies.model import Topology


def vsctl(*args: str, timeout: float = 30.0) -> str:
    out = subprocess.run(
        ["ovs-vsctl", f"--timeout={int(timeout)}", *args], capture_output=True, text=True, timeout=timeout + 5
    )
    if out.returncode != 0:
        raise RuntimeError(f"ovs-vsctl {' '.join(args[:6])}...: {out.stderr.strip()}")
    return out.stdout


def ofctl(*args: str, timeout: float = 60.0) -> str:
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def ovs_up() -> None:
    """scripts/ovs-up: start the OVS daemons if they are not running (idempotent)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([os.path.join(here, "scripts", "ovs-up")], check=True, capture_output=True, timeout=60)


def ports_by_switch(topo: Topology) -> dict[str, set[int]]:
    """Every port number the topology uses on each switch (links, hosts, middleboxes, edge)."""
    used: dict[str, set[int]] = {sw.name: set() for sw in topo.switches}
    refs = [end for link in topo.links for end in (link.a, link.b)]
    refs += [h.iface.attach for h in topo.hosts]
    refs += [leg.attach for mb in topo.middleboxes for leg in (mb.inside, mb.outside)]
    refs += [topo.edge.inside.attach, topo.edge.outside.attach]
    for ref in refs:
        if ref is not None:
            used[ref.switch].add(ref.port)
    return used


@dataclass
class Bridges:
    """The benchmark's bridges: dpid -> bridge name. ``prefix`` is unique per run."""

    prefix: str
    names: dict[int, str]

    def connect(self, port: int, host: str = "127.0.0.1") -> None:
        """Point every bridge at a controller on host:port (replacing the previous one), in one
        ovs-vsctl transaction. A new target connects at once; the same target after a controller
        restart waits out OVS's reconnect backoff (1, 2, 4, 8 s: OVS 3.1 ignores ``max_backoff``
        for a controller it cannot reach). Never via no controller at all: OVS flushes a
        bridge's flows when its last controller goes."""
        target = of_target(port, host)
        args: list[str] = []
        for name in self.names.values():
            args += ["--", "set-controller", name, target, "--", "set", "controller", name, "max_backoff=1000"]
        vsctl(*args[1:])

    def disconnect(self) -> None:
        for name in self.names.values():
            vsctl("del-controller", name)

    def connected(self) -> dict[int, bool]:
        """dpid -> is_connected, as OVS reports it."""
        out: dict[int, bool] = {}
        for dpid, name in self.names.items():
            uuid = _controller_uuid(name)
            out[dpid] = bool(uuid) and vsctl("get", "Controller", uuid, "is_connected").strip() == "true"
        return out

    def delete(self) -> None:
        for name in self.names.values():
            try:
                vsctl("--if-exists", "del-br", name)
            except Exception:
                pass


def openflow_scheme() -> str:
    """``ssl`` (the lab PKI, as in production) unless ``BENCH_OPENFLOW=tcp`` (to compare)."""
    return "tcp" if os.environ.get("BENCH_OPENFLOW") == "tcp" else "ssl"


def of_target(port: int, host: str = "127.0.0.1") -> str:
    if openflow_scheme() == "ssl":
        from viplanes.lab.labpki import ensure_lab_pki

        ensure_lab_pki()  # the shared vswitchd presents the lab certificate
    return f"{openflow_scheme()}:{host}:{port}"


def serve_security_args() -> list[str]:
    """`viplanes serve` options matching ``of_target``."""
    if openflow_scheme() == "tcp":
        return ["--insecure-tcp"]
    from viplanes.lab.labpki import ensure_lab_pki

    return ensure_lab_pki().serve_args()


def _controller_uuid(bridge: str) -> str:
    return vsctl("get", "Bridge", bridge, "controller").strip().strip("[]").split(",")[0].strip()


def create_bridges(topo: Topology, prefix: str, controller_port: int | None) -> Bridges:
    """One secure-mode OpenFlow 1.3 netdev bridge per switch; ports as the topology numbers them."""
    if len(prefix) > 9:
        raise ValueError(f"bridge prefix {prefix!r} too long for 15-character port names")
    ports = ports_by_switch(topo)
    names: dict[int, str] = {}
    bridges = Bridges(prefix, names)
    try:
        for sw in topo.switches:
            name = f"{prefix}{sw.name}"[:15]
            args = [
                "add-br",
                name,
                "--",
                "set",
                "bridge",
                name,
                "datapath_type=netdev",
                "fail_mode=secure",
                "protocols=OpenFlow13",
                f"other-config:datapath-id={sw.dpid:016x}",
            ]
            for port in sorted(ports[sw.name]):
                pname = f"{name}p{port}"[:15]
                args += [
                    "--",
                    "add-port",
                    name,
                    pname,
                    "--",
                    "set",
                    "interface",
                    pname,
                    "type=internal",
                    f"ofport_request={port}",
                ]
            if controller_port is not None:
                args += ["--", "set-controller", name, of_target(controller_port)]
            names[sw.dpid] = name
            vsctl(*args)
    except Exception:
        bridges.delete()
        raise
    return bridges


_FIELD = re.compile(r"(\w+)=([^,\s]+)")


@dataclass(frozen=True)
class FlowLine:
    """One line of ``ovs-ofctl dump-flows``: the parts that tell whether a flow was touched."""

    cookie: int
    duration_s: float
    priority: int
    n_packets: int
    match: str  # everything that identifies the flow besides cookie and priority

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.cookie, self.priority, self.match)


def parse_dump_flows(text: str) -> list[FlowLine]:
    """Parse ``ovs-ofctl -O OpenFlow13 dump-flows`` output (header lines are skipped)."""
    flows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("cookie="):
            continue
        head, _, actions = line.partition(" actions=")
        stats = dict(_FIELD.findall(head))
        # the match is the tail after the last stats field (priority=N,<match>)
        match_part = head.split("priority=", 1)[1] if "priority=" in head else ""
        prio_text, _, match = match_part.partition(",")
        flows.append(
            FlowLine(
                cookie=int(stats["cookie"], 16),
                duration_s=float(stats["duration"].rstrip("s")),
                priority=int(prio_text.split()[0]) if prio_text else 32768,
                n_packets=int(stats.get("n_packets", "0")),
                match=match.strip(),
            )
        )
    return flows


def dump_flows(bridge: str) -> list[FlowLine]:
    return parse_dump_flows(ofctl("dump-flows", bridge))


def flow_count(bridge: str) -> int:
    """Flows on the bridge, cheaply (aggregate stats instead of a full dump)."""
    text = ofctl("dump-aggregate", bridge)
    m = re.search(r"flow_count=(\d+)", text)
    return int(m.group(1)) if m else 0


@dataclass(frozen=True)
class Untouched:
    """Comparison of two dumps taken before and after a reconcile."""

    before: int
    after: int
    missing: int  # flows that were there before and are gone
    added: int  # flows that appeared
    reset: int  # flows present in both whose duration went down (deleted and re-added)
    examples: tuple[str, ...] = ()  # a few of the flows that changed, for the report

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.added == 0 and self.reset == 0


def compare_dumps(before: Iterable[FlowLine], after: Iterable[FlowLine]) -> Untouched:
    """Did anything happen to the flows between the two dumps? Durations only grow if not."""
    b = {f.key: f for f in before}
    a = {f.key: f for f in after}
    reset = [k for k in b.keys() & a.keys() if a[k].duration_s + 0.001 < b[k].duration_s]
    missing, added = b.keys() - a.keys(), a.keys() - b.keys()
    examples = [
        f"{what} cookie={k[0]:#x} priority={k[1]} {k[2]}"
        for what, keys in (("missing", missing), ("added", added), ("reset", reset))
        for k in sorted(keys)[:3]
    ]
    return Untouched(
        before=len(b), after=len(a), missing=len(missing), added=len(added), reset=len(reset), examples=tuple(examples)
    )
