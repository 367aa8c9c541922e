"""When does a flow become visible on a switch? One ``ovs-ofctl monitor BR watch:`` per bridge.

Why a flow monitor and not polling flow stats: OVS pushes a flow-monitor update (ONF/NX flow
monitor) the moment a flow-table change is committed, over one long-lived management connection
per bridge, so the timestamp is the commit time plus one pipe read, whoever made the change
(our controller, os-ken's ``ofctl_rest``, Faucet). A stats poller would add half its period to
every sample, and a spawned ``ovs-ofctl dump-flows`` per sample costs a process start (several
milliseconds on this machine) that would be charged to the system being measured.

Every line is timestamped with ``time.perf_counter()`` when read, and kept; a measurement asks
"when had each bridge seen N added (or deleted) flows carrying this marker, after t0?".
Parsing is pure (:func:`parse_monitor_line`) so it is unit-tested without OVS.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from viplanes.lifecycle import stop_process

_EVENT = re.compile(r"^\s*event=(ADDED|DELETED|MODIFIED|ABBREVIATED)\b(.*)$")
_FIELD = re.compile(r"\b(table|cookie|reason)=([^\s,]+)")


@dataclass(frozen=True)
class FlowEvent:
    """One flow-monitor update: what happened to which flow, and the rest of the line."""

    kind: str  # ADDED | DELETED | MODIFIED | ABBREVIATED
    table: int | None
    cookie: int | None
    text: str  # the whole line, for marker matching (match fields and actions)


def parse_monitor_line(line: str) -> FlowEvent | None:
    """`` event=ADDED table=1 cookie=0x12 tcp,in_port=1 actions=...`` -> FlowEvent; others None.

    Header lines (``ONFST_FLOW_MONITOR reply ...``) and anything unrecognised give None.
    """
    m = _EVENT.match(line)
    if m is None:
        return None
    fields = dict(_FIELD.findall(m.group(2)))
    table = int(fields["table"]) if "table" in fields else None
    cookie = int(fields["cookie"], 16) if "cookie" in fields else None
    return FlowEvent(kind=m.group(1), table=table, cookie=cookie, text=line.strip())


def cookie_marker(cookie: int) -> re.Pattern[str]:
    """Matches the monitor lines of flows with exactly this cookie."""
    return re.compile(rf"\bcookie={cookie:#x}(?![0-9a-f])")


def port_marker(port: int) -> re.Pattern[str]:
    """Matches flows whose TCP/UDP source or destination port is ``port`` (any field spelling)."""
    return re.compile(rf"\b(?:tp|tcp|udp)_(?:src|dst)={port}(?!\d)")


def completion_time(
    events: Iterable[tuple[float, FlowEvent]], kind: str, marker: re.Pattern[str], count: int, since: float
) -> float | None:
    """Time of the ``count``-th ``kind`` event matching ``marker`` at or after ``since``, or None."""
    seen = 0
    for t, ev in events:
        if t < since or ev.kind != kind or not marker.search(ev.text):
            continue
        seen += 1
        if seen >= count:
            return t
    return None


class FlowWatch:
    """A running ``ovs-ofctl monitor`` per bridge and the timestamped events it has seen."""

    def __init__(self, bridges: Mapping[int, str]) -> None:
        self.bridges = dict(bridges)  # dpid -> bridge name
        self.events: dict[int, list[tuple[float, FlowEvent]]] = {d: [] for d in self.bridges}
        self._cond = threading.Condition()
        self._procs: list[subprocess.Popen] = []
        self._ready: set[int] = set()
        self._errors: list[str] = []

    def start(self, timeout_s: float = 10.0) -> FlowWatch:
        for dpid, name in self.bridges.items():
            proc = subprocess.Popen(
                ["ovs-ofctl", "-O", "OpenFlow13", "monitor", name, "watch:"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
            )
            self._procs.append(proc)
            threading.Thread(target=self._read, args=(dpid, proc), daemon=True, name=f"flowwatch-{name}").start()
        # the monitor is live once it has printed its (empty) initial reply
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while len(self._ready) < len(self.bridges):
                left = deadline - time.monotonic()
                if left <= 0 or any(p.poll() is not None for p in self._procs):
                    self.stop()
                    raise RuntimeError(f"ovs-ofctl monitor did not start: {self._errors}")
                self._cond.wait(left)
        return self

    def __enter__(self) -> FlowWatch:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _read(self, dpid: int, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            t = time.perf_counter()
            ev = parse_monitor_line(line)
            with self._cond:
                if ev is not None:
                    self.events[dpid].append((t, ev))
                elif "reply" in line:
                    self._ready.add(dpid)
                else:
                    self._errors.append(line.strip())
                self._cond.notify_all()

    def wait(
        self, kind: str, marker: re.Pattern[str], counts: Mapping[int, int], since: float, timeout_s: float
    ) -> float | None:
        """Time when every bridge had ``counts[dpid]`` matching events since ``since``; None on
        timeout. Only the bridges named in ``counts`` are waited for."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                times = [completion_time(self.events[d], kind, marker, n, since) for d, n in counts.items()]
                if all(t is not None for t in times):
                    return max(times)  # type: ignore[type-var]
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def forget(self) -> None:
        """Drop the events seen so far (keeps the scans short over a long run)."""
        with self._cond:
            for d in self.events:
                self.events[d] = []

    def stop(self) -> None:
        for proc in self._procs:
            stop_process(proc)
        self._procs = []
