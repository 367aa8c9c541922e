"""The VIP Lanes campus (topologies/campus.yaml) for Mininet's own `mn` command.

    sudo mn --custom mininet/campus.py --topo campus --controller remote,port=6653

(`--switch` is not needed: every switch is OVS on the userspace datapath, OpenFlow 1.3,
fail-secure, with the YAML's dpid; its ports are the YAML's OpenFlow port numbers.)
Another file: `--topo campus,topologies/other.yaml`. Bridges are named vlmn<switch>.

  desktop --1-+                                          +-4-- dtn (science DMZ)
              s1 -3------1- s2 -3 ==== bypass ==== 3- s3 -2---- edge ---1- s4 -2-- cloud
  server  --2-+             |2                       |1       router        (S3 + iperf3)
                            fw ------------------ nat
                       (stateful, capped)    (MASQUERADE)

Subnets: campus 10.1.0.0/24 (gateway fw 10.1.0.1), fw-nat 10.2.0.0/30, border 198.51.100.0/24
(edge 198.51.100.1, lane pool 198.51.100.192/27), cloud 203.0.113.0/24 (cloud 203.0.113.10).
This folder holds scripts only: it must never get an __init__.py (it would shadow `mininet`).
"""

import glob
import inspect
import os
import site
import sys

# `mn --custom` exec()s this file without __file__; the code object still knows its file name.
_frame = inspect.currentframe()
if _frame is None:  # a Python without stack frames; `mn` runs CPython, which has them
    raise RuntimeError("mininet/campus.py finds its own path from its frame: run it with CPython")
HERE = os.path.dirname(os.path.abspath(_frame.f_code.co_filename))
REPO = os.path.dirname(HERE)

try:
    import viplanes.lab.topo  # noqa: F401
except ImportError:  # `mn` runs the system python: borrow the repo's venv (same python 3.11)
    for sitedir in glob.glob(os.path.join(REPO, ".venv", "lib", "python3*", "site-packages")):
        site.addsitedir(sitedir)
    if HERE in sys.path:
        sys.path.remove(HERE)

from viplanes.lab.topo import LabTopo  # noqa: E402
from viplanes.topologies.loader import load_topology  # noqa: E402


def campus(path: str = os.path.join(REPO, "topologies", "campus.yaml")) -> LabTopo:
    """The campus topology (or another YAML file) with hand-run bridge names vlmn<switch>."""
    return LabTopo(topology=load_topology(path), prefix="vlmn")


topos = {"campus": campus}
