"""The leftover check (tests/support/leftovers.py) sees what a test left running: a thread, a
child, and a grandchild whose parent is gone; and not what was running before, nor what a process
that was running before starts meanwhile."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from tests.support import leftovers
from tests.support.procs import wait_for

TAG = leftovers.tag_session()


def test_a_thread_and_a_child_left_running_are_named() -> None:
    before = leftovers.snapshot(TAG)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="left-behind", daemon=True)
    thread.start()
    child = subprocess.Popen(["sleep", "30"])
    try:
        found = leftovers.leftovers(before, TAG, grace_s=0.2)
        assert found.threads == ("left-behind",)
        assert found.processes == {child.pid: "sleep 30"}
        assert "thread 'left-behind'" in found.describe() and f"process {child.pid}: sleep 30" in found.describe()
    finally:
        stop.set()
        thread.join(5)
        leftovers.kill({child.pid})
        child.wait(5)
    assert not leftovers.leftovers(before, TAG, grace_s=2)


def test_an_orphaned_grandchild_is_found_by_its_environment() -> None:
    """Its parent exited: init adopted it, so only the inherited tag ties it to the session."""
    before = leftovers.snapshot(TAG)
    spawn = "import subprocess as s; print(s.Popen(['sleep', '30'], stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"
    out = subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True, timeout=30, check=True)
    orphan = int(out.stdout)
    try:
        assert orphan not in leftovers.descendants(leftovers.os.getpid())
        assert leftovers.leftovers(before, TAG, grace_s=0.2).processes == {orphan: "sleep 30"}
    finally:
        leftovers.kill({orphan})
    assert wait_for(lambda: orphan not in leftovers.session_processes(TAG), 5)


def test_what_an_earlier_process_starts_is_its_business() -> None:
    """A process running before the test (a PostgreSQL postmaster, a Mininet host's shell) may
    start its own children meanwhile (backends, autovacuum): not the test's leftovers."""
    shell = subprocess.Popen(["sh", "-c", "read line; sleep 30"], stdin=subprocess.PIPE)
    try:
        time.sleep(0.1)
        before = leftovers.snapshot(TAG)
        assert shell.pid in before.pids
        assert shell.stdin is not None
        shell.stdin.write(b"go\n")
        shell.stdin.flush()
        assert wait_for(lambda: leftovers.descendants(shell.pid), 5)  # its sleep started
        assert not leftovers.new_since(before, TAG)
    finally:
        leftovers.kill(leftovers.descendants(shell.pid) | {shell.pid})
        shell.wait(5)


def test_a_leftover_named_by_its_test_is_not_waited_for_again_by_its_module() -> None:
    """The module's check would wait its whole grace for the same thread and name it again."""
    watch = leftovers.Watch(TAG)
    module = watch.snapshot()
    test = watch.snapshot()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="left-by-a-test", daemon=True)
    thread.start()
    try:
        assert watch.check(test, grace_s=0.2).threads == ("left-by-a-test",)
        started = time.monotonic()
        assert not watch.check(module, grace_s=3.0), "the module's check named the test's thread again"
        assert time.monotonic() - started < 1.0, "the module's check waited for the test's thread again"
    finally:
        stop.set()
        thread.join(5)
