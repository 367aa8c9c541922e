"""The checks of `viplanes doctor`: each returns findings (ok / warn / FAIL, and the fix).

Everything a check reads from outside (the time, the file system's state, the readiness report)
is passed in, so the tests break one thing at a time without a lab: an expired certificate is
the present moved past its end, a switch missing is a report without it.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from viplanes.store.db import Database
from viplanes.store.filemode import private_mode_problem, sqlite_file
from viplanes.topologies.model import Topology

OK, WARN, FAIL = "ok", "warn", "FAIL"
EXPIRY_WARN_DAYS = 30
CLOCK_WARN_S = 1.0
REFUSAL_RECENT_S = 120.0  # refusals older than this do not explain a switch that is away now


@dataclass(frozen=True)
class Finding:
    check: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        tail = f" -> {self.fix}" if self.fix and self.status != OK else ""
        return f"{self.status:<4} {self.check}: {self.detail}{tail}"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


# --- database -----------------------------------------------------------------------------------


def missing_sqlite_file(db_url: str | None) -> Finding | None:
    """A FAIL when the URL names a SQLite file that does not exist (opening it would create it)."""
    from sqlalchemy import make_url

    from viplanes.store.db import resolve_db_url

    url = resolve_db_url(db_url)
    if not url.startswith("sqlite"):
        return None
    path = sqlite_file(make_url(url).database)
    if path is None or path.exists():
        return None
    return Finding("database", FAIL, f"{path.resolve()} does not exist", "give --db, or run viplanes db upgrade there")


def check_database(db: Database, statvfs: Callable[[str], Any] = os.statvfs) -> list[Finding]:
    """Reachable, migrated to this code's head, writable, and (SQLite) readable by its owner only."""
    from sqlalchemy import text

    from viplanes.store.backup import known_revisions
    from viplanes.store.migrations import current
    from viplanes.store.writeprobe import OK as WRITES_OK
    from viplanes.store.writeprobe import WriteProbe

    where = db.display_url
    try:
        with db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any driver's error: the point is to name it
        detail = str(exc).splitlines()[0][:200] if str(exc) else exc.__class__.__name__
        return [
            Finding("database", FAIL, f"{where}: {detail}", "check --db / VIPLANES_DB_URL and that the server runs")
        ]
    out = [Finding("database", OK, f"{where} reachable")]
    revision, known = current(db.engine), known_revisions()
    head = max(known)
    if revision == head:
        out.append(Finding("database.schema", OK, f"at {head} (head)"))
    elif revision is None:
        out.append(Finding("database.schema", FAIL, "never migrated", f"viplanes db upgrade --db {where}"))
    elif revision not in known:
        out.append(
            Finding("database.schema", FAIL, f"at {revision}, newer than this code ({head})", "upgrade viplanes")
        )
    else:
        out.append(
            Finding("database.schema", FAIL, f"at {revision}, code expects {head}", f"viplanes db upgrade --db {where}")
        )
    writes = WriteProbe(db, statvfs=statvfs).check() if revision is not None else None
    if writes is None:
        pass  # nothing to write to yet: the schema finding says what to run
    elif writes == WRITES_OK:
        out.append(Finding("database.writes", OK, "a rolled-back write succeeded"))
    else:
        out.append(Finding("database.writes", FAIL, writes, "make the database writable (mount, disk space, role)"))
    out.extend(_file_modes(db))
    return out


def _file_modes(db: Database) -> list[Finding]:
    path = sqlite_file(db.engine.url.database) if db.is_sqlite else None
    if path is None:
        return []
    problems = [
        p
        for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
        if f.exists() and (p := private_mode_problem(f)) is not None
    ]
    if problems:
        return [Finding("database.permissions", FAIL, "; ".join(p.split(" (")[0] for p in problems), "chmod 600 them")]
    return [Finding("database.permissions", OK, f"{path} 0600")]


# --- PKI ----------------------------------------------------------------------------------------


def check_pki(
    pki_dir: Path | None,
    fleet_pins: Iterable[str],
    topology: Topology | None,
    now: dt.datetime,
    insecure_tcp: bool = False,
) -> list[Finding]:
    """The controller's files, their modes and expiry, every switch certificate there, the pins."""
    from viplanes import pki

    if pki_dir is None and insecure_tcp:
        return [
            Finding(
                "pki",
                WARN,
                "the service runs --insecure-tcp: switches are neither authenticated nor encrypted",
                "labs only: viplanes pki init, then [serve] pki = DIR without insecure_tcp",
            )
        ]
    if pki_dir is None:
        return [
            Finding(
                "pki", WARN, "no PKI named: TLS not checked", "set [serve] pki = DIR in the config file (or --pki DIR)"
            )
        ]
    try:
        ca, cert, key = pki.controller_files(pki_dir)
    except pki.PKIError as exc:
        return [Finding("pki", FAIL, str(exc).split(" (")[0], f"viplanes pki init --dir {pki_dir}")]
    out = [Finding("pki", OK, f"{pki_dir}: ca.crt, controller.crt, controller.key")]
    problem = private_mode_problem(key)
    out.append(
        Finding("pki.key", FAIL, problem.split(" (")[0], f"chmod 600 {key}")
        if problem
        else Finding("pki.key", OK, "0600")
    )
    certs: dict[str, Any] = {}
    for path in [ca, cert, *sorted(pki_dir.glob("switch-*.crt"))]:
        try:
            loaded = pki.load_cert(path)
        except (OSError, ValueError) as exc:
            out.append(Finding(f"pki.{path.name}", FAIL, str(exc)[:200], f"reissue {path.name}"))
            continue
        certs[pki.cert_sha256(loaded)] = path.name
        out.append(_expiry(path, loaded, now))
    out.extend(_pins(fleet_pins, topology, certs))
    return out


def _expiry(path: Path, cert: Any, now: dt.datetime) -> Finding:
    ends = cert.not_valid_after_utc
    starts = cert.not_valid_before_utc
    fix = "viplanes pki init (the CA) or issue it again with viplanes pki"
    name = f"pki.{path.name}"
    if now >= ends:
        return Finding(name, FAIL, f"expired {ends:%Y-%m-%d}", fix)
    if now < starts:
        return Finding(name, FAIL, f"not valid before {starts:%Y-%m-%d %H:%M} UTC", "check this machine's clock")
    left = (ends - now).days
    if left < EXPIRY_WARN_DAYS:
        return Finding(name, WARN, f"expires in {left} days ({ends:%Y-%m-%d})", fix)
    return Finding(name, OK, f"valid until {ends:%Y-%m-%d}")


def _pins(fleet_pins: Iterable[str], topology: Topology | None, certs: dict[str, str]) -> list[Finding]:
    from viplanes.controller.openflow.peerauth import normalize_pins

    try:
        fleet = normalize_pins(fleet_pins)
    except ValueError as exc:
        return [Finding("pki.pins", FAIL, str(exc), "--switch-cert-pin takes a SHA-256 of 64 hex digits")]
    owners = [("--switch-cert-pin", p) for p in sorted(fleet)]
    if topology is not None:
        owners += [(f"switch {sw.name}", p.lower()) for sw in topology.switches for p in sw.cert_sha256]
    if not owners:
        return [Finding("pki.pins", OK, "none set: a campus-CA certificate naming the dpid admits a switch")]
    unknown = [f"{who} {pin[:12]}..." for who, pin in owners if pin not in certs]
    if unknown:
        return [
            Finding(
                "pki.pins",
                WARN,
                f"not a certificate in the PKI directory: {', '.join(unknown)}",
                "fine if issued elsewhere; else fix the pin in the topology or --switch-cert-pin",
            )
        ]
    return [Finding("pki.pins", OK, f"{len(owners)} pins, each a certificate in the PKI directory")]


# --- topology, switches, clock -------------------------------------------------------------------


def load_topology_checked(path: str | None, config_file: Path | None = None) -> tuple[Topology | None, Finding]:
    """The campus serve runs (campusfile.py): a deployment's file must name it."""
    from viplanes.cli.campusfile import choose_topology
    from viplanes.topologies.loader import TopologyError, load_topology

    choice = choose_topology(path, config_file, "serve", for_switches=True)
    if choice.path is None:
        return None, Finding("topology", FAIL, choice.problem.split("; ")[0], choice.problem.split("; ", 1)[1])
    try:
        topology = load_topology(choice.path)
    except (TopologyError, OSError) as exc:
        return None, Finding(
            "topology", FAIL, f"{choice.path}: {str(exc).splitlines()[0]}", "fix the file; viplanes topology check"
        )
    if choice.warning:  # no configuration file at all: the lab's and a developer's case, said so
        detail = f"{choice.path}: {len(topology.switches)} switches (the bundled lab campus: no config file names one)"
        return topology, Finding("topology", OK, detail)
    return topology, Finding("topology", OK, f"{choice.path}: {len(topology.switches)} switches")


def check_conntrack_ceiling(topology: Topology) -> Finding:
    """The border's connection table has a ceiling (topologies/capcheck.py)."""
    from viplanes.topologies.capcheck import conntrack_ceiling_problem

    problem = conntrack_ceiling_problem(topology)
    if problem is None:
        return Finding("conntrack", OK, "the border's connection table has a ceiling (or no conntrack)")
    return Finding("conntrack", FAIL, problem, "docs/dataplane.md, 'What one lane can take at the border'")


START_FIX = "start viplanes serve (or api) and retry"
TOKEN_FIX = "give doctor an operator's token (--token or VIPLANES_TOKEN): /readyz names nothing to anyone else"


def check_switches(
    topology: Topology,
    report: dict[str, Any] | None,
    source: str,
    insecure_tcp: bool = False,
    wall: Callable[[], float] | None = None,
    fix: str = START_FIX,
) -> list[Finding]:
    """Each switch of the topology connected and reconciled, per the readiness ``report``; for
    one that is not, the cause its recent refusals name (switch_causes.py). No report: ``fix``."""
    from viplanes.cli.switch_causes import not_connected

    if report is None:
        return [Finding("switches", FAIL, f"no readiness report ({source})", fix)]
    seen = {int(sw.get("dpid", -1)): sw for sw in report.get("switches", []) if isinstance(sw, dict)}
    # the latest refusals only: a cause fixed minutes ago is not today's
    since = (wall or time.time)() - REFUSAL_RECENT_S
    refused = [r for r in report.get("refused", []) if isinstance(r, dict) and float(r.get("at", 0)) >= since]
    out = []
    for sw in topology.switches:
        got = seen.get(sw.dpid)
        if got is None or not got.get("connected"):
            detail, fix = not_connected(sw.name, sw.dpid, refused, insecure_tcp)
            out.append(Finding(f"switch {sw.name}", FAIL, f"{detail} ({source})", fix))
        elif not got.get("reconciled"):
            out.append(Finding(f"switch {sw.name}", WARN, "connected, not reconciled yet", "wait a few seconds, rerun"))
        else:
            out.append(Finding(f"switch {sw.name}", OK, f"dpid {sw.dpid} connected and reconciled"))
    return out + check_links(report)


def check_links(report: dict[str, Any]) -> list[Finding]:
    """Each declared link the controller reports (``links`` of /readyz): usable, or why not."""
    out = []
    for link in report.get("links", []):
        if not isinstance(link, dict):
            continue
        name, state, reason = link.get("name", "?"), link.get("state", "?"), link.get("reason", "")
        if state == "up":
            out.append(Finding(f"link {name}", OK, "up"))
        else:
            fix = (
                "check the cabling: the controller's probes must see each end at its declared port"
                if state == "unverified"
                else "lanes use the other links meanwhile; check the cable and both switch ports"
            )
            out.append(Finding(f"link {name}", FAIL, f"{state}: {reason}", fix))
    return out


def fetch_readiness(
    api_url: str,
    db: Database | None,
    timeout_s: float = 5.0,
    ca_file: str | None = None,
    token: str | None = None,
) -> tuple[dict[str, Any] | None, str, str]:
    """(report, where it came from, the fix when there is none). The whole report is the API's
    ``/api/v1/readiness`` (an operator's ``token``; an https API verified against ``ca_file``,
    else the system store), else the master's report in the database (split deployment). Without
    either, /readyz's counts are all anyone may read: no switch is named."""
    import requests

    base, verify = api_url.rstrip("/"), ca_file or True
    refused = ""
    if token:
        try:
            r = requests.get(
                f"{base}/api/v1/readiness",
                headers={"Authorization": f"Bearer {token}"},
                timeout=timeout_s,
                verify=verify,
            )
            body = r.json()
            if r.status_code in (200, 503) and isinstance(body, dict):
                return body, f"{api_url}/api/v1/readiness", ""
            refused = f"; the API refused the token ({r.status_code})"
        except (requests.RequestException, ValueError):
            pass
    if db is not None:
        from viplanes.cluster.reports import read_readiness

        try:
            report = read_readiness(db)
        except Exception:  # no schema, no table: nothing to report
            report = {}
        if report.get("master"):
            return report, "the master's report in the database", ""
    try:
        body = requests.get(f"{base}/readyz", timeout=timeout_s, verify=verify).json()
    except (requests.RequestException, ValueError):
        body = None
    if isinstance(body, dict) and "switches_total" in body:
        counts = f"{body.get('switches_ready')} of {body.get('switches_total')} switches ready"
        return None, f"{api_url}/readyz: {counts}; which ones needs an operator's token{refused}", TOKEN_FIX
    return None, f"{api_url} unreachable, no controller report in the database", START_FIX


def check_clock(db: Database, max_skew_s: float, wall: Callable[[], float] | None = None) -> Finding:
    from viplanes.cluster.clockcheck import clock_skew

    try:
        skew, rtt = clock_skew(db, wall)
    except Exception as exc:
        return Finding("clock", FAIL, f"could not read the database's clock: {str(exc).splitlines()[0][:120]}")
    text = f"{abs(skew):.3f} s {'behind' if skew > 0 else 'ahead of'} the database (round trip {rtt * 1000:.1f} ms)"
    if abs(skew) > max_skew_s + rtt / 2:
        return Finding("clock", FAIL, text, f"synchronise clocks (NTP); controllers refuse past {max_skew_s:g} s")
    if abs(skew) > CLOCK_WARN_S:
        return Finding("clock", WARN, text, "synchronise clocks (NTP)")
    return Finding("clock", OK, text)
