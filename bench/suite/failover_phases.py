"""Where one fail-over's time goes (issue 44): the phases between ``kill -9`` of the master and
the first lane answered active, from the new master's log and the database.

    expiry      kill -> the dead master's lease ends (its last ``expires_at``, database clock)
    take        lease end -> the standby logs ``now MASTER`` (from the kill when it took the
                lease before its end: the dead master's session ended, no expiry waited for)
    roles       -> ``role MASTER ... on N switches`` (every switch answered the role request)
    reconcile   -> the last switch logged ``reconciled`` (flows read back, nothing changed)
    activate    -> the lane's committed ``activated_at``
    answer      -> the API's answer reached the benchmark

All stamps are wall-clock seconds of this machine (the processes' log times, PostgreSQL's
``clock_timestamp()``), so one clock. The log times have millisecond steps.
"""

from __future__ import annotations

import re
import statistics
from datetime import datetime
from pathlib import Path

PHASES = ("expiry", "take", "roles", "reconcile", "activate", "answer")
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (.*)$")


def log_events(text: str, after: float) -> list[tuple[float, str]]:
    """(wall time, rest of the line) of every timestamped log line at or after ``after``."""
    out = []
    for line in text.splitlines():
        m = STAMP.match(line)
        if m:
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if at >= after - 0.001:
                out.append((at, m.group(2)))
    return out


def first(events: list[tuple[float, str]], needle: str, after: float = 0.0) -> float | None:
    return next((at for at, rest in events if needle in rest and at >= after), None)


def phases(
    log_text: str, killed_at: float, expires_at: float, activated_at: float, answered_at: float, switches: int
) -> dict[str, float]:
    """One kill's phases in seconds (a phase whose log line is missing is left out; the rest
    then measure from the last stamp found)."""
    events = log_events(log_text, killed_at)
    master = first(events, "now MASTER")
    roles = first(events, "role MASTER", master or killed_at)
    reconciled = [at for at, rest in events if " INFO reconciled " in rest and at >= (roles or killed_at)]
    last_reconciled = reconciled[switches - 1] if len(reconciled) >= switches else None
    # taken before the dead master's lease ended (its session's end, ``viplanes.cluster.liveness``):
    # no expiry waited for, ``take`` counts from the kill
    early = master is not None and master < expires_at
    stamps = [killed_at, None if early else expires_at, master, roles, last_reconciled, activated_at, answered_at]
    out: dict[str, float] = {}
    prev = killed_at
    for name, at in zip(PHASES, stamps[1:], strict=True):
        if at is not None:
            out[name] = at - prev
            prev = at
    return out


def table(rows: list[dict[str, float]]) -> str:
    """p50 / p90 / max of each phase over the kills, in ms, and each kill's slowest phase."""
    lines = [f"{'phase':<10} {'p50':>7} {'p90':>7} {'max':>7}  (ms, {len(rows)} kills)"]
    for name in PHASES:
        vals = sorted(r[name] for r in rows if name in r)
        if vals:
            p90 = vals[min(len(vals) - 1, round(0.9 * (len(vals) - 1)))]
            lines.append(f"{name:<10} {statistics.median(vals) * 1000:7.0f} {p90 * 1000:7.0f} {vals[-1] * 1000:7.0f}")
    return "\n".join(lines)


def read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
