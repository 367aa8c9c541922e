"""Whether a child process has bound its UDP port yet, read from ``/proc``.

goflow2 says nothing when it starts listening; a datagram the gate forwards before then is lost
(the port answers ICMP unreachable). ``CollectorProcess.start`` waits for the bind with this, so
the first seconds of a switch's samples are decoded, not dropped. The socket must be the child's
own (its inode among the child's descriptors), so another process on the port does not count.
``/proc/PID/net`` is the child's network namespace, also when ``ip netns exec`` wraps it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

PROC = Path("/proc")


def udp_inodes(table: str, port: int) -> set[int]:
    """Socket inodes bound to local ``port`` in a ``/proc/net/udp`` or ``udp6`` table's text."""
    inodes: set[int] = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or ":" not in fields[1]:
            continue
        try:
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            inode = int(fields[9])
        except ValueError:
            continue
        if local_port == port and inode:
            inodes.add(inode)
    return inodes


def socket_inodes(links: Iterable[str]) -> set[int]:
    """Inodes of ``socket:[N]`` descriptor links; other links are skipped."""
    found: set[int] = set()
    for link in links:
        if link.startswith("socket:[") and link.endswith("]"):
            try:
                found.add(int(link[8:-1]))
            except ValueError:
                continue
    return found


def bound(pid: int, port: int, proc: Path = PROC) -> bool:
    """True once process ``pid`` holds a UDP socket on ``port``; False while not (or gone)."""
    base = proc / str(pid)
    try:
        tables = [(base / "net" / name).read_text() for name in ("udp", "udp6")]
        names = os.listdir(base / "fd")
    except OSError:
        return False
    ours = socket_inodes(_links(base / "fd", names))
    return any(udp_inodes(t, port) & ours for t in tables)


def _links(fds: Path, names: Iterable[str]) -> list[str]:
    """The descriptors' targets; one closed since the listing is skipped."""
    links = []
    for name in names:
        try:
            links.append(os.readlink(fds / name))
        except OSError:
            continue
    return links


def wait_bound(
    pid: int,
    port: int,
    timeout_s: float,
    alive: Callable[[], bool],
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll every 20 ms until ``pid`` has bound ``port``; False at ``timeout_s`` or when it exits."""
    deadline = clock() + timeout_s
    while True:
        if bound(pid, port):
            return True
        if not alive() or clock() >= deadline:
            return False
        pause(0.02)
