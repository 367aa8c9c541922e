"""What a server process holds and spends, read from /proc and ss: the soak's after-checks.

A server that leaks shows it here first: sockets left in CLOSE-WAIT on its port (it never closed
what the client closed), sockets on its port beyond its listeners, file descriptors above the
warm baseline, and CPU ticks that stay up once the clients are gone (a loop spinning on dead
sockets).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def with_children(pid: int) -> list[int]:
    """``pid`` and its children (``viplanes api`` forks its workers), read from /proc."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(pids))


def cpu_ticks(pids: list[int]) -> int:
    """utime + stime of ``pids`` (fields 14 and 15 of /proc/PID/stat), in clock ticks."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # after "(comm)": state is field 3, utime 14
    return total


def fd_count(pids: list[int]) -> int:
    return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids if os.path.isdir(f"/proc/{pid}/fd"))


def socket_fds(pids: list[int]) -> int:
    """Descriptors of ``pids`` that are sockets (any port, any protocol)."""
    return len(_socket_inodes(pids))


def _socket_inodes(pids: list[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.glob("*") if fd_dir.is_dir() else []:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def port_sockets(pids: list[int], port: int) -> int:
    """TCP sockets ``pids`` hold with local port ``port`` (listeners included), from /proc/net/tcp*."""
    inodes = _socket_inodes(pids)
    held = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[9] in inodes:
                held += 1
    return held


def close_wait(port: int) -> int:
    """Sockets in CLOSE-WAIT whose local port is ``port`` (`ss -tn state close-wait`)."""
    out = subprocess.run(
        ["ss", "-tnH", "state", "close-wait", f"( sport = :{port} )"], capture_output=True, text=True, check=True
    ).stdout
    return len([line for line in out.splitlines() if line.strip()])


def idle_rate(pids: list[int], seconds: float) -> float:
    """CPU ticks per second spent by ``pids`` over the next ``seconds``."""
    t0, c0 = time.monotonic(), cpu_ticks(pids)
    time.sleep(seconds)
    return (cpu_ticks(pids) - c0) / (time.monotonic() - t0)


def time_to_idle(
    pids: list[int], baseline: float, margin: float, limit_s: float, window_s: float = 1.0
) -> float | None:
    """Seconds from now until a ``window_s`` window in which ``pids`` spend at most
    ``baseline + margin`` ticks/s (the end of that window), or None within ``limit_s``."""
    start = time.monotonic()
    samples = [(start, cpu_ticks(pids))]
    while time.monotonic() - start < limit_s:
        time.sleep(0.1)
        now = time.monotonic()
        samples.append((now, cpu_ticks(pids)))
        older = [s for s in samples if now - s[0] >= window_s]
        if older:
            t, c = older[-1]
            if (samples[-1][1] - c) / (now - t) <= baseline + margin:
                return now - start
    return None
