"""The names one test run puts where every run on the machine can see them: bridges on the shared
ovs-vswitchd, interfaces and addresses in the root namespace, named network namespaces.

Two `make test` runs at once must not share any of them (issue 43). Each name carries this run's
tag: the PID in base 36 (at most 5 characters for Linux's 22-bit PIDs), unique among live
processes, where ``pid % 100000`` could repeat; ``VIPLANES_TEST_RUN_TAG`` overrides it (the
workers of one run may share a parent's tag on purpose). Linux allows 15 characters per interface
name: :func:`ifname` refuses longer ones instead of letting ``ip`` truncate or fail later.
"""

from __future__ import annotations

import os
import re
import subprocess

IFNAMSIZ = 15
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def base36(n: int) -> str:
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = _DIGITS[d] + out
        if n == 0:
            return out


def run_tag() -> str:
    tag = os.environ.get("VIPLANES_TEST_RUN_TAG") or base36(os.getpid())
    if not re.fullmatch(r"[a-z0-9]{1,6}", tag):
        raise ValueError(f"VIPLANES_TEST_RUN_TAG={tag!r}: 1-6 lowercase letters or digits")
    return tag


def ifname(kind: str, suffix: str = "", longest_suffix: str = "") -> str:
    """``<kind><tag><suffix>``; ValueError when it (or it with ``longest_suffix``, e.g. the
    ``-eth12`` Mininet adds to a switch or host name) exceeds 15 characters."""
    name = f"{kind}{run_tag()}{suffix}"
    if len(name + longest_suffix) > IFNAMSIZ:
        raise ValueError(f"interface name {name + longest_suffix!r} exceeds {IFNAMSIZ} characters")
    return name


def used_link_octets(addr_lines: str) -> set[int]:
    """The X of every 169.254.X.Y address in ``ip -4 -o addr`` output."""
    return {int(m) for m in re.findall(r"inet 169\.254\.(\d+)\.\d+", addr_lines)}


def pick_link_octet(tag: str, used: set[int]) -> int:
    """A 169.254.X.0/24 for this run's root-namespace links: X from the tag, moved past any in use
    (another run's controller link or listener address)."""
    start = int(tag, 36) % 200 + 20  # 20..219: clear of 169.254.0/1 and 169.254.255
    for step in range(200):
        octet = (start - 20 + step) % 200 + 20
        if octet not in used:
            return octet
    raise RuntimeError("no free 169.254.X.0/24 for a test link")


def link_octet() -> int:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, timeout=10).stdout
    return pick_link_octet(run_tag(), used_link_octets(out))
