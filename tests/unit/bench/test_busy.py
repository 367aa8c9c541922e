"""``--busy N``: N processes that take CPU while the block runs, and none after it."""

from __future__ import annotations

import time
from pathlib import Path

from bench.harness.busy import busy


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_the_workers_spin_and_are_gone_after() -> None:
    with busy(2) as procs:
        assert len(procs) == 2
        deadline = time.monotonic() + 10
        while min(cpu_ticks(p.pid) for p in procs) < 5:  # 50 ms of CPU each (100 Hz ticks)
            assert time.monotonic() < deadline, "the busy workers took no CPU in 10 s"
            time.sleep(0.05)
    assert all(p.returncode is not None for p in procs)
    assert not any(Path(f"/proc/{p.pid}").exists() for p in procs)


def test_none_for_zero() -> None:
    with busy(0) as procs:
        assert procs == []
