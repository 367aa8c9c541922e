"""Mininet node classes for the campus lab: end hosts, the firewall, the NAT and the edge router.

Every class sets itself up in ``config()`` and undoes it in ``terminate()``. All of it runs inside
the node's own network namespace (``self.cmd``), so the machine's own network is never touched.
Interfaces are configured explicitly by name because middleboxes have two legs.
"""

from __future__ import annotations

from collections.abc import Sequence
from subprocess import Popen
from typing import Any

from mininet.node import Host, Node, OVSSwitch

from . import cpulimit
from .cpulimit import CpuLimit

# Offloads break TCP over OVS's userspace datapath (checksums left to hardware that isn't there).
OFFLOADS_OFF = "tx off rx off tso off gso off gro off"


def offloads_off(node: Node, intf: str) -> None:
    """Turn off checksum/segmentation offloads on one interface, in the node's namespace."""
    node.cmd(f"ethtool -K {intf} {OFFLOADS_OFF} >/dev/null 2>&1")


def quiet_ipv6(node: Node) -> None:
    """No IPv6 in the lab unless the topology gives an interface an ``ip6`` (``static_ipv6``):
    otherwise it only adds router solicitations and MLD noise for the controller."""
    node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")


def static_ipv6(node: Node, intf: str, ip6: str) -> None:
    """IPv6 on one interface, statically: no autoconfiguration, no router advertisements, no
    duplicate address detection (the lab's addresses are unique by construction)."""
    for key, value in (("disable_ipv6", 0), ("accept_ra", 0), ("autoconf", 0), ("accept_dad", 0)):
        node.cmd(f"sysctl -qw net.ipv6.conf.{intf}.{key}={value}")
    node.cmd(f"ip -6 addr add {ip6} dev {intf} nodad")


class LabHost(Host):
    """An end host (desktop, server, DTN, cloud): MAC, IP and default route from the topology.

    With ``cpu_cores`` (and ``cpu_group``, the run's own group name), every process the lab runs in
    the host shares that much CPU (``cpulimit``): the host stands for a slower machine.
    """

    cpu_limit: CpuLimit | None = None

    def config(
        self,
        ip6: str | None = None,
        gateway6: str | None = None,
        cpu_cores: float | None = None,
        cpu_group: str = "",
        **params: Any,
    ) -> dict:
        if cpu_cores is not None:
            limit = cpulimit.current_plan(cpu_group or self.name, cpu_cores)
            cpulimit.apply(limit)
            cpulimit.join(limit, self.pid)  # the shell: ``cmd`` and everything it starts
            self.cpu_limit = limit
        result = super().config(**params)
        quiet_ipv6(self)
        for intf in self.intfNames():
            if intf != "lo":
                offloads_off(self, intf)
                if ip6:  # dual stack (issue 11): the host's global address, default route
                    static_ipv6(self, intf, ip6)
        if ip6 and gateway6:
            self.cmd(f"ip -6 route replace default via {gateway6}")
        return result

    def popen(self, *args: Any, **kwargs: Any) -> Popen:
        """Mininet's popen; in a limited host the process joins the host's group before it runs."""
        if self.cpu_limit is not None and "mncmd" not in kwargs:
            kwargs["mncmd"] = cpulimit.wrap(self.cpu_limit, ["mnexec", "-da", str(self.pid)])
        return super().popen(*args, **kwargs)

    def terminate(self) -> None:
        super().terminate()
        if self.cpu_limit is not None:
            cpulimit.remove(self.cpu_limit.path)


class Router(Node):
    """A node that forwards between its legs. ``legs`` is ((intf, mac, ip/prefix), ...)."""

    def config(  # keyword-only, as Mininet passes them, so subclasses take their own
        self,
        *,
        legs: Sequence[tuple[str, str, str]] = (),
        routes: Sequence[tuple[str, str]] = (),
        legs6: Sequence[tuple[str, str]] = (),
        routes6: Sequence[tuple[str, str]] = (),
        **params: Any,
    ) -> dict:
        params.pop("ip", None)
        params.pop("mac", None)
        result = super().config(**params)
        quiet_ipv6(self)
        for intf, mac, ip in legs:
            self.cmd(f"ip link set {intf} down")
            self.cmd(f"ip link set {intf} address {mac}")
            self.cmd(f"ip addr flush dev {intf}")
            self.cmd(f"ip addr add {ip} dev {intf}")
            self.cmd(f"ip link set {intf} up")
            offloads_off(self, intf)
        for dst, via in routes:
            self.cmd(f"ip route replace {dst} via {via}")
        for intf, ip6 in legs6:  # dual stack: v6 forwarded as is (the NAT box translates only v4)
            static_ipv6(self, intf, ip6)
        for dst, via in routes6:
            self.cmd(f"ip -6 route replace {dst} via {via}")
        if legs6:
            self.cmd("sysctl -qw net.ipv6.conf.all.forwarding=1")
        self.cmd("sysctl -qw net.ipv4.ip_forward=1")
        # Routers in one L2 domain would otherwise send redirects that shortcut the middleboxes.
        self.cmd("sysctl -qw net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0")
        return result

    def terminate(self) -> None:
        self.cmd("sysctl -qw net.ipv4.ip_forward=0")
        super().terminate()


class EdgeRouter(Router):
    """The campus edge router: plain forwarding; lanes end at its inside leg. With the topology's
    ``nat_router`` naming it, it also translates the lanes of private hosts (``masquerade``: their
    networks) to its outside address, as a border without NAT leaves them (docs/hardware.md)."""

    masquerade: tuple[str, ...] = ()

    def config(self, *, masquerade: Sequence[str] = (), **params: Any) -> dict:
        result = super().config(**params)
        self.masquerade = tuple(masquerade)
        for src in self.masquerade:
            self.cmd(f"iptables -t nat -A POSTROUTING -s {src} -j MASQUERADE")
        return result

    def terminate(self) -> None:
        if self.masquerade:
            self.cmd("iptables -t nat -F POSTROUTING")
        super().terminate()


def _cap(node: Node, intf: str, mbps: float) -> None:
    """Shape egress of one leg with htb at ``mbps``; a short queue, as a busy DPI box has."""
    node.cmd(f"tc qdisc del dev {intf} root >/dev/null 2>&1")
    node.cmd(f"tc qdisc add dev {intf} root handle 1: htb default 1")
    node.cmd(f"tc class add dev {intf} parent 1: classid 1:1 htb rate {mbps}mbit ceil {mbps}mbit burst 15k")
    node.cmd(f"tc qdisc add dev {intf} parent 1:1 handle 10: pfifo limit 100")


class Firewall(Router):
    """Stateful firewall with a throughput cap that models deep packet inspection.

    New connections are accepted only from the inside leg; replies ride conntrack's ESTABLISHED
    state; everything else is dropped. ``mbps`` caps both legs (upload and download).
    """

    def config(self, *, inside: str = "", outside: str = "", mbps: float | None = None, **params: Any) -> dict:
        result = super().config(**params)
        self.inside_intf, self.outside_intf = inside, outside
        for rule in (
            "-P FORWARD DROP",
            "-F FORWARD",
            "-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
            f"-A FORWARD -i {inside} -o {outside} -m conntrack --ctstate NEW -j ACCEPT",
            "-A FORWARD -m conntrack --ctstate INVALID -j DROP",
        ):
            self.cmd(f"iptables {rule}")
            self.cmd(f"ip6tables {rule} 2>/dev/null")  # the same policy for IPv6
        if mbps:
            for intf in (inside, outside):
                _cap(self, intf, mbps)
        return result

    def terminate(self) -> None:
        self.cmd("iptables -F FORWARD; iptables -P FORWARD ACCEPT")
        self.cmd("ip6tables -F FORWARD 2>/dev/null; ip6tables -P FORWARD ACCEPT 2>/dev/null")
        for intf in (getattr(self, "inside_intf", ""), getattr(self, "outside_intf", "")):
            if intf:
                self.cmd(f"tc qdisc del dev {intf} root >/dev/null 2>&1")
        super().terminate()


class Nat(Router):
    """Source NAT: everything leaving the outside leg takes the outside leg's address."""

    def config(self, *, outside: str = "", **params: Any) -> dict:
        result = super().config(**params)
        self.outside_intf = outside
        self.cmd(f"iptables -t nat -A POSTROUTING -o {outside} -j MASQUERADE")
        return result

    def terminate(self) -> None:
        self.cmd("iptables -t nat -F POSTROUTING")
        super().terminate()


class LabSwitch(OVSSwitch):
    """OVS on the userspace datapath, OpenFlow 1.3, fail-secure; offloads off on its ports."""

    def __init__(self, name: str, **params: Any) -> None:
        params.setdefault("datapath", "user")
        params.setdefault("protocols", "OpenFlow13")
        params.setdefault("failMode", "secure")
        super().__init__(name, **params)

    def start(self, controllers: list) -> None:
        super().start(controllers)
        self.quiet_ports()

    def quiet_ports(self) -> None:
        """Offloads off and IPv6 off on our own root-namespace ports (and nothing else)."""
        for intf in self.intfNames():
            if intf != "lo":
                offloads_off(self, intf)
                self.cmd(f"sysctl -qw net.ipv6.conf.{intf}.disable_ipv6=1")
