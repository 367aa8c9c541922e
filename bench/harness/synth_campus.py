"""A synthetic campus of N access switches, shaped like ``topologies/campus.yaml`` (issue 13).

    host -- a<i> -- g<k> -- core ==bypass== dist ==bypass== border -- edge -- inet -- cloud
                            |fw                            |nat, dtn

Every access switch ``a<i>`` carries ``hosts_per_access`` NAT'd desktops (ports 1..h, uplink
port 20) and hangs off one of ``ceil(N / 16)`` aggregation switches ``g<k>`` (downlinks 1..16,
uplink 30). The firewall's inside leg is on ``core``, the NAT's outside leg and the edge router on
``border``: default traffic goes through both middleboxes, a lane takes the bypass links. So
every lane from an access host crosses exactly 5 switches (a, g, core, dist, border) whatever N
is, and only the number of switches it does *not* touch grows.

Desktops are ``10.1.<i>.<10+j>/16`` behind the firewall (``10.1.0.1/16``), like the campus's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

AGG_FANOUT = 16
ACCESS_UPLINK = 20
AGG_UPLINK = 30
PATH_SWITCHES = 5  # a<i>, g<k>, core, dist, border


def access_name(i: int) -> str:
    return f"a{i}"


def host_name(i: int, j: int) -> str:
    return f"h{i}x{j}"


def host_ip(i: int, j: int) -> str:
    return f"10.1.{i}.{10 + j}"


def campus_data(access: int, hosts_per_access: int = 2) -> dict[str, Any]:
    """The topology as YAML data (load it with ``parse_topology``)."""
    if not 1 <= access <= 250 or not 1 <= hosts_per_access <= 8:
        raise ValueError("1..250 access switches with 1..8 hosts each")
    aggs = math.ceil(access / AGG_FANOUT)
    switches: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    hosts: list[dict[str, Any]] = []
    dpid = 1
    for name, role in (("core", "core"), ("dist", "core"), ("border", "border"), ("inet", "internet")):
        switches.append({"name": name, "dpid": dpid, "role": role})
        dpid += 1
    for k in range(aggs):
        switches.append({"name": f"g{k}", "dpid": dpid, "role": "aggregation"})
        links.append({"a": f"g{k}:{AGG_UPLINK}", "b": f"core:{k + 1}", "mbps": 1000})
        dpid += 1
    for i in range(access):
        name = access_name(i)
        switches.append({"name": name, "dpid": dpid, "role": "access"})
        links.append({"a": f"{name}:{ACCESS_UPLINK}", "b": f"g{i // AGG_FANOUT}:{i % AGG_FANOUT + 1}", "mbps": 1000})
        dpid += 1
        for j in range(hosts_per_access):
            hosts.append(
                {
                    "name": host_name(i, j),
                    "role": "desktop",
                    "mac": f"02:00:{i >> 8:02x}:{i & 0xFF:02x}:01:{j:02x}",
                    "ip": f"{host_ip(i, j)}/16",
                    "gateway": "10.1.0.1",
                    "attach": f"{name}:{j + 1}",
                    "nic_mbps": 100,
                }
            )
    links += [
        {"a": "core:100", "b": "dist:1", "mbps": 1000, "bypass": True},
        {"a": "dist:2", "b": "border:3", "mbps": 1000, "bypass": True},
    ]
    hosts += [
        {
            "name": "dtn",
            "role": "dtn",
            "mac": "02:00:00:03:00:30",
            "ip": "198.51.100.30/24",
            "gateway": "198.51.100.1",
            "attach": "border:4",
            "nic_mbps": 200,
        },
        {
            "name": "cloud",
            "role": "cloud",
            "mac": "02:00:00:04:00:10",
            "ip": "203.0.113.10/24",
            "gateway": "203.0.113.1",
            "attach": "inet:2",
            "nic_mbps": 400,
        },
    ]
    return {
        "name": f"synth{access}",
        "description": f"synthetic campus: {access} access switches, {hosts_per_access} hosts each",
        "lane_pool": {"prefix": "198.51.100.192/27", "mac": "02:ff:00:00:00:01"},
        "switches": switches,
        "links": links,
        "hosts": hosts,
        "middleboxes": [
            {
                "name": "fw",
                "kind": "firewall",
                "mbps": 15,
                "inside": {"mac": "02:00:00:02:00:01", "ip": "10.1.0.1/16", "attach": "core:101"},
                "outside": {"mac": "02:00:00:0f:00:01", "ip": "10.2.0.1/30"},
                "routes": [{"dst": "0.0.0.0/0", "via": "10.2.0.2"}],
            },
            {
                "name": "nat",
                "kind": "nat",
                "inside": {"mac": "02:00:00:0f:00:02", "ip": "10.2.0.2/30"},
                "outside": {"mac": "02:00:00:03:00:02", "ip": "198.51.100.2/24", "attach": "border:1"},
                "routes": [{"dst": "10.1.0.0/16", "via": "10.2.0.1"}, {"dst": "0.0.0.0/0", "via": "198.51.100.1"}],
            },
        ],
        "edge": {
            "name": "edge",
            "inside": {"mac": "02:00:00:03:00:01", "ip": "198.51.100.1/24", "attach": "border:2"},
            "outside": {"mac": "02:00:00:04:00:01", "ip": "203.0.113.1/24", "attach": "inet:1"},
        },
    }


def write_campus(path: Path, access: int, hosts_per_access: int = 2) -> Path:
    path.write_text(yaml.safe_dump(campus_data(access, hosts_per_access), sort_keys=False))
    return path
