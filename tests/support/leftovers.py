"""What a test left running: threads of the test process, and processes it started, alive after
its teardown.

Why: after CI run 47's integration session printed "323 passed", a thread of the pytest process
still retried LISTEN against the session's PostgreSQL cluster, stopped by then (a
``RemoteDataplane`` built by ``tests/unit/cluster/test_reports.py`` and never stopped). A leftover
holds a port, a database connection or a bridge that a later test needs, and says so only in a log
nobody reads. The root conftest takes a ``Snapshot`` before each integration test (and module) and
warns when something new is still alive a few seconds after its teardown, once (``Watch``). It
reports and does not kill: a wrong guess must not take a server the rest of the session shares.

A process counts as the session's when it descends from the test process, or carries
``SESSION_ENV`` with this process's id in its environment: a grandchild whose parent died is
re-parented to init, but keeps the environment it inherited.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SESSION_ENV = "VL_TEST_SESSION"  # not VIPLANES_*: tests that strip those from a child keep it
PROC = Path("/proc")


def tag_session() -> str:
    """Mark every process started from now on as this process's (through the environment)."""
    tag = str(os.getpid())
    os.environ[SESSION_ENV] = tag
    return tag


def _alive(pid: int) -> bool:
    """Running, or stopped; not a zombie (a dead child nobody reaped yet holds nothing)."""
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _parent(pid: int) -> int:
    try:
        return int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _children(pid: int) -> set[int]:
    kids: set[int] = set()
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return kids
    for task in tasks:
        try:
            kids |= {int(k) for k in (task / "children").read_text().split()}
        except OSError:
            continue
    return kids


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for kid in _children(todo.pop()) - found:
            found.add(kid)
            todo.append(kid)
    return found


def tagged(tag: str) -> set[int]:
    """Every process whose environment carries ``SESSION_ENV=tag`` (readable as root)."""
    marker = f"{SESSION_ENV}={tag}".encode()
    found: set[int] = set()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in env.split(b"\0"):
            found.add(int(entry.name))
    return found


def session_processes(tag: str) -> set[int]:
    me = os.getpid()
    return {pid for pid in descendants(me) | tagged(tag) if pid != me and _alive(pid)}


def cmdline(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?"


@dataclass(frozen=True)
class Snapshot:
    threads: frozenset[threading.Thread]
    pids: frozenset[int]

    def __or__(self, other: Snapshot) -> Snapshot:
        return Snapshot(self.threads | other.threads, self.pids | other.pids)


NOTHING = Snapshot(frozenset(), frozenset())


def snapshot(tag: str) -> Snapshot:
    return Snapshot(frozenset(threading.enumerate()), frozenset(session_processes(tag)))


@dataclass(frozen=True)
class Leftovers:
    threads: tuple[str, ...]  # names of threads alive now and not before
    processes: dict[int, str]  # pid -> command line
    found: Snapshot = NOTHING  # the same threads and processes, as objects and pids

    def __bool__(self) -> bool:
        return bool(self.threads or self.processes)

    def describe(self) -> str:
        lines = [f"thread {name!r}" for name in self.threads]
        lines += [f"process {pid}: {cmd}" for pid, cmd in sorted(self.processes.items())]
        return "; ".join(lines)


def _under(pid: int, owners: frozenset[int]) -> bool:
    """``pid`` descends from one of ``owners``: a process that was already running started it
    (a PostgreSQL backend, a Mininet host's command), and that one's owner answers for it."""
    seen = 0
    while pid > 1 and seen < 64:
        pid = _parent(pid)
        if pid in owners:
            return True
        seen += 1
    return False


def new_since(before: Snapshot, tag: str) -> Leftovers:
    threads = [t for t in threading.enumerate() if t not in before.threads and t.is_alive()]
    pids = {pid for pid in session_processes(tag) - before.pids if not _under(pid, before.pids)}
    found = Snapshot(frozenset(threads), frozenset(pids))
    return Leftovers(tuple(sorted(t.name for t in threads)), {pid: cmdline(pid) for pid in pids}, found)


def leftovers(before: Snapshot, tag: str, grace_s: float = 5.0) -> Leftovers:
    """What is new since ``before`` and still alive after ``grace_s`` (a stop under way may end)."""
    deadline = time.monotonic() + grace_s
    while True:
        found = new_since(before, tag)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


class Watch:
    """The session's checks, nested (a test's inside its module's): each leftover is waited for
    and reported once, by the innermost check that sees it. The module's check used to wait its
    grace again for a thread its test had already named (5 s more each, CI run 49: 6 of 13)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.reported = NOTHING

    def snapshot(self) -> Snapshot:
        return snapshot(self.tag)

    def check(self, before: Snapshot, grace_s: float = 5.0) -> Leftovers:
        """``leftovers`` since ``before``, leaving out (and not waiting for) what was reported."""
        found = leftovers(before | self.reported, self.tag, grace_s)
        still = Snapshot(  # the dead leave it: a pid may be reused by a new leftover
            frozenset(t for t in self.reported.threads if t.is_alive()),
            frozenset(pid for pid in self.reported.pids if _alive(pid)),
        )
        self.reported = still | found.found
        return found


def kill(pids: set[int] | dict[int, str]) -> None:
    """SIGKILL these processes (the check's own tests clean up with it)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
