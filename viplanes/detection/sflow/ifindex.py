"""The sFlow ifIndex of each OpenFlow port of a sampling switch, learned from its OVSDB.

Open vSwitch writes a port's kernel ifindex (its netdev's) as the sFlow input of every sample
taken there, and records the same number in the OVSDB ``Interface.ifindex`` column beside
``ofport``. The guard (``agents.SampleGuard``) needs OpenFlow port -> ifIndex to tell a sample
taken on a host's port from one taken elsewhere; OpenFlow does not carry ifindexes, so this reads
them from the switch's database: the local one (``ovsdb``), or a remote switch's through an
``ovs-vsctl --db`` target (``tcp:HOST:6640``, ``ssl:...``: the switch host must serve it).
One ``ovs-vsctl`` call lists the bridge (by datapath id), its ports and their interfaces.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

REFRESH_S = 5.0  # at most one read per switch this often (a port added later is learned then)
FAILED_S = 60.0  # after a failed read (an OVSDB away): the reader thread must not wait on it often
Run = Callable[..., Any]


def ovsdb_argv(target: str) -> list[str]:
    db = [] if target in ("", "ovsdb") else [f"--db={target}"]
    return [
        "ovs-vsctl",
        "--timeout=5",
        *db,
        "-f",
        "json",
        "--columns=datapath_id,ports",
        "list",
        "Bridge",
        "--",
        "--columns=_uuid,interfaces",
        "list",
        "Port",
        "--",
        "--columns=_uuid,ofport,ifindex",
        "list",
        "Interface",
    ]


def _documents(text: str) -> list[dict[str, Any]]:
    """ovs-vsctl prints one JSON table per command, one after the other."""
    out: list[dict[str, Any]] = []
    at, decoder = 0, json.JSONDecoder()
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return out
        doc, at = decoder.raw_decode(text, at)
        out.append(doc)


def _members(value: Any) -> list[Any]:
    """An OVSDB set (``["set", [...]]``) or a single atom, as a list of atoms."""
    if isinstance(value, list) and len(value) == 2 and value[0] == "set":
        return list(value[1])
    return [value]


def _uuid(value: Any) -> str | None:
    return value[1] if isinstance(value, list) and len(value) == 2 and value[0] == "uuid" else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parse_ifindexes(text: str, dpid: int) -> dict[int, int]:
    """OpenFlow port -> ifIndex of the bridge with datapath id ``dpid`` ({} when it is not there)."""
    bridges, ports, ifaces = (_rows(doc) for doc in _documents(text)[:3])
    want = f"{dpid:016x}"
    port_uuids = [
        _uuid(p) for row in bridges if str(row.get("datapath_id", "")).lower() == want for p in _members(row["ports"])
    ]
    iface_uuids = {
        _uuid(i) for row in ports if _uuid(row.get("_uuid")) in port_uuids for i in _members(row["interfaces"])
    }
    out: dict[int, int] = {}
    for row in ifaces:
        ofport, ifindex = _int(row.get("ofport")), _int(row.get("ifindex"))
        if _uuid(row.get("_uuid")) in iface_uuids and ofport is not None and ifindex is not None:
            out[ofport] = ifindex
    return out


def _rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    headings = doc.get("headings", [])
    return [dict(zip(headings, row, strict=False)) for row in doc.get("data", [])]


class OvsdbIfindexes:
    """Per sampling switch, its learned port -> ifIndex map, re-read at most every ``REFRESH_S``."""

    def __init__(
        self,
        switches: Mapping[str, tuple[int, str]],
        run: Run = subprocess.run,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._switches = dict(switches)  # name -> (dpid, ovsdb target)
        self._run, self._clock = run, clock
        self._known: dict[str, dict[int, int]] = {}
        self._next_read: dict[str, float] = {}

    def ifindexes(self, switch: str, fresh: bool = False) -> Mapping[int, int]:
        """What is known of ``switch``; ``fresh``: read again first unless read within REFRESH_S."""
        where = self._switches.get(switch)
        if where is None:
            return {}
        now = self._clock()
        if switch not in self._known or (fresh and now >= self._next_read.get(switch, -1e18)):
            learned = self._read(switch, *where)
            self._next_read[switch] = now + (REFRESH_S if learned is not None else FAILED_S)
            self._known[switch] = learned if learned is not None else self._known.get(switch, {})
        return self._known[switch]

    def _read(self, switch: str, dpid: int, target: str) -> dict[int, int] | None:
        """The bridge's port -> ifIndex; None when the database could not be read (logged)."""
        try:
            done = self._run(ovsdb_argv(target), capture_output=True, text=True, timeout=10, check=False)
            if done.returncode != 0:
                raise OSError((done.stderr or "").strip()[:200])
            learned = parse_ifindexes(done.stdout, dpid)
        except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as exc:
            log.warning("sflow: cannot learn %s's ifIndexes from OVSDB: %s", switch, exc)
            return None
        return learned
