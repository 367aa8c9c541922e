"""A CPU limit for one lab host: the processes the lab runs in it share ``cores`` of CPU time.

A host with a limit stands for a slower machine (docs/lab.md, "The desktop's own limit"). The
limit is a CPU cgroup: quota / period = cores, the kernel's CFS bandwidth control. Mininet's own
``CPULimitedHost`` does the same through cgcreate/cgexec, but needs the cgroup v1 tools and sets
the limit by the host's Mininet name, shared by every run; ours is per run, works on cgroup v1
(``cpu.cfs_quota_us``, this machine) and v2 (``cpu.max``), and its writes are a plan computed
from the mount table, tested without a kernel.

Every process in the host joins the group: the host's shell (so ``host.cmd`` and its children),
and every ``host.popen`` through ``wrap``, which runs ``sh -c 'echo $$ > cgroup.procs && exec
mnexec ...'``: the process joins before it execs, so nothing it starts escapes, and it does not
run at all if it cannot join.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

GROUP_ROOT = "viplanes-lab"  # every lab run's groups live under this directory of the hierarchy
PERIOD_US = 100_000  # the kernel's default: a limited host is throttled for at most ~100 ms at once


class CpuLimitError(RuntimeError):
    """The machine has no CPU cgroup controller we can use: the host cannot be limited."""


@dataclass(frozen=True)
class CpuLimit:
    """Where a host's group lives and what to write to make it ``cores`` of CPU."""

    path: Path  # the host's group directory
    writes: tuple[tuple[Path, str], ...]  # (file, value) in order, after creating the directories
    cores: float

    @property
    def procs(self) -> Path:
        """The file a process writes its pid to, to join the group (v1 and v2 alike)."""
        return self.path / "cgroup.procs"


def _mounts(mounts: str) -> list[tuple[Path, str, set[str]]]:
    out = []
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append((Path(parts[1]), parts[2], set(parts[3].split(","))))
    return out


def plan_cpu_limit(mounts: str, group: str, cores: float, period_us: int = PERIOD_US) -> CpuLimit:
    """The writes that give ``group`` (a path under ``GROUP_ROOT``) ``cores`` of CPU.

    ``mounts`` is ``/proc/self/mounts``. A v1 ``cpu`` hierarchy wins (a hybrid machine such as
    this one mounts v2 without the cpu controller); otherwise v2, where every ancestor below the
    mount must pass the controller down (``+cpu`` in ``cgroup.subtree_control``).
    """
    if cores <= 0:
        raise ValueError(f"cores must be positive, got {cores}")
    quota = max(1000, round(cores * period_us))  # the kernel refuses quotas under 1 ms
    rel = Path(GROUP_ROOT) / group
    found = _mounts(mounts)
    for mount, fstype, options in found:
        if fstype == "cgroup" and "cpu" in options:
            path = mount / rel
            writes = ((path / "cpu.cfs_period_us", str(period_us)), (path / "cpu.cfs_quota_us", str(quota)))
            return CpuLimit(path, writes, cores)
    for mount, fstype, _options in found:
        if fstype == "cgroup2":
            path = mount / rel
            ancestors = [mount, *(mount / Path(*rel.parts[: i + 1]) for i in range(len(rel.parts) - 1))]
            passes = tuple((a / "cgroup.subtree_control", "+cpu") for a in ancestors)
            return CpuLimit(path, (*passes, (path / "cpu.max", f"{quota} {period_us}")), cores)
    raise CpuLimitError("no cgroup hierarchy with the cpu controller is mounted (see /proc/self/mounts)")


def current_plan(group: str, cores: float) -> CpuLimit:
    """``plan_cpu_limit`` for this machine's mounts."""
    return plan_cpu_limit(Path("/proc/self/mounts").read_text(), group, cores)


def apply(limit: CpuLimit) -> None:
    """Create the group and set its quota; a refused write names the file and the reason."""
    try:
        limit.path.mkdir(parents=True, exist_ok=True)
        for file, value in limit.writes:
            file.write_text(value)
    except OSError as exc:
        raise CpuLimitError(f"cannot limit the CPU with {exc.filename or limit.path}: {exc.strerror}") from exc


def join(limit: CpuLimit, pid: int) -> None:
    """Move a running process (and, on v1 and v2 alike, all its threads) into the group."""
    limit.procs.write_text(str(pid))


def wrap(limit: CpuLimit, argv: list[str]) -> list[str]:
    """``argv`` run so that its process joins the group before it execs (fails if it cannot)."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(limit.procs), *argv]


def remove(path: Path, wait: float = 2.0) -> bool:
    """Remove a group and the empty run directories above it, up to ``GROUP_ROOT``.

    A group with processes cannot be removed: wait up to ``wait`` seconds for them to exit (the
    host's processes are killed just before). False when it stayed.
    """
    deadline = time.monotonic() + wait
    while path.is_dir():
        try:
            os.rmdir(path)
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    if GROUP_ROOT not in path.parts:
        return True  # not one of ours: never walk up someone else's directories
    parent = path.parent
    while parent.name != GROUP_ROOT and parent.parent != parent:
        with contextlib.suppress(OSError):
            os.rmdir(parent)  # only when empty: another host of the run may still be there
        parent = parent.parent
    return True


def run_groups(mounts: str, run_prefix: str) -> list[Path]:
    """Every host group a run (by its prefix, e.g. ``vl3fa2``) left, for the stale-run cleanup."""
    out: list[Path] = []
    for mount, fstype, options in _mounts(mounts):
        if fstype == "cgroup2" or (fstype == "cgroup" and "cpu" in options):
            run_dir = mount / GROUP_ROOT / run_prefix
            if run_dir.is_dir():
                out += [p for p in run_dir.iterdir() if p.is_dir()]
    return out
