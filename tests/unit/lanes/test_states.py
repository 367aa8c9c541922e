"""The lane state table (viplanes/lanes/states.py): its pairs, the SQL guards built from it in every
dialect, and that no other module writes a lane's state."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.dialects import postgresql, sqlite

from viplanes.dataplane.memory import MemoryDataplane
from viplanes.errors import Conflict
from viplanes.lanes import states
from viplanes.lanes.manager import LaneInput, LaneManager
from viplanes.store import records as store
from viplanes.store.db import Database
from viplanes.store.lanesql import core, postgres
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.models import Lane
from viplanes.topologies.loader import load_topology

REPO = Path(__file__).resolve().parents[3]
T0 = 1_800_000_000.0
LIVE = ("requested", "scheduled", "installing", "active", "interrupted")
ENDS = ("expired", "released", "revoked", "failed")

# The lifecycle, written out by hand: requested -> scheduled -> installing -> active -> expired |
# released | revoked, or failed. A lane that has ended never moves again.
ALLOWED = {
    ("requested", "scheduled"): "book",
    ("requested", "installing"): "activate",
    ("scheduled", "installing"): "activate",
    ("installing", "active"): "record",
    ("installing", "failed"): "record",
    ("installing", "interrupted"): "record",  # activated while no usable path exists: held
    ("requested", "failed"): "fail",
    ("scheduled", "failed"): "fail",
    ("active", "failed"): "fail",
    ("scheduled", "expired"): "expire",
    ("installing", "expired"): "expire",
    ("active", "expired"): "expire",
    ("active", "interrupted"): "interrupt",  # no usable path left (issue 42)
    ("interrupted", "active"): "resume",
    ("interrupted", "expired"): "expire",
    **{(src, "released"): "release" for src in LIVE},
    **{(src, "revoked"): "revoke" for src in LIVE},
}
ALL_PAIRS = [(src, dst) for src in LIVE + ENDS for dst in LIVE + ENDS]


@pytest.mark.parametrize(("src", "dst"), ALL_PAIRS)
def test_every_pair_is_allowed_or_forbidden_as_the_lifecycle_says(src: str, dst: str) -> None:
    assert states.can_move(src, dst) is ((src, dst) in ALLOWED)
    assert states.event_of(src, dst) == ALLOWED.get((src, dst))
    assert (dst in states.TRANSITIONS[src]) is ((src, dst) in ALLOWED)
    if (src, dst) not in ALLOWED:
        with pytest.raises(Conflict) as exc:
            states.change(src, dst, "why", T0)
        assert exc.value.code == "bad_transition"


def test_the_table_names_its_states_and_events() -> None:
    assert states.STATES == LIVE + ENDS and states.LIVE == LIVE
    assert frozenset(ENDS) == states.TERMINAL
    assert set(states.TABLE.values()) == set(states.EVENTS)
    assert all(not states.TRANSITIONS[end] for end in ENDS)  # an ended lane never moves again
    assert states.sources(states.REVOKE) == LIVE  # revoked: only from a live state
    assert states.sources(states.RELEASE) == LIVE
    assert states.END_FROM == LIVE and states.RECORD_FROM == ("installing",)
    assert states.targets(states.RECORD) == ("active", "interrupted", "failed")
    assert states.targets(states.ACTIVATE) == ("installing",)
    assert set(states.END_ACTIONS) == set(states.targets(states.RELEASE, states.REVOKE))


def test_the_table_imports_nothing_of_ours_but_errors() -> None:
    """The store builds its statements from the table at import time: no cycle may form."""
    tree = ast.parse((REPO / "viplanes" / "lanes" / "states.py").read_text())
    ours = {
        n.module
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(("viplanes", "tests"))
    }
    ours |= {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name.startswith("viplanes")
    }
    assert ours == {"viplanes.errors"}


def test_the_columns_of_each_move() -> None:
    assert states.change("installing", "active", at=T0) == {"state": "active", "activated_at": T0}
    assert states.change("scheduled", "installing") == {"state": "installing"}
    assert states.change("active", "expired", "duration ended", T0) == {
        "state": "expired",
        "reason": "duration ended",
        "ended_at": T0,
    }
    assert states.ending("revoked", "revoked by root", T0)["state"] == "revoked"
    with pytest.raises(ValueError):
        states.ending("expired", "not a caller's end", T0)
    with pytest.raises(ValueError):
        states.values("failed")  # an end says why and when


# --- the SQL guards are the table's -------------------------------------------------------------


def _guard(sql: str, column: str = "state") -> tuple[str, ...]:
    """The states in a statement's ``<column> IN (...)`` or ``<column> = '...'`` guard."""
    found = re.search(rf"\b{re.escape(column)} (?:IN \(([^)]*)\)|= ('\w+'))", sql)
    assert found is not None, sql
    return tuple(re.findall(r"'(\w+)'", found.group(1) or found.group(2)))


CORE_GUARDS = {
    "_RECORD_ACTIVATION": states.sources(states.RECORD),
    "_END_LANE": states.sources(states.RELEASE, states.REVOKE),
    "_END_LANES": states.sources(states.REVOKE),
    "_GRANT_LANES": states.sources(states.REVOKE),
}


@pytest.mark.parametrize("name", sorted(CORE_GUARDS))
@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
def test_core_statements_are_guarded_by_the_table(name: str, dialect: object) -> None:
    sql = str(getattr(core, name).compile(dialect=dialect))
    assert _guard(sql, "lanes.state") == CORE_GUARDS[name]


def test_sqlite_cursor_runs_the_same_guards() -> None:
    """The raw cursor path (lanesql/sqlite.py) runs the text SQLAlchemy compiled once: same guard."""
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        for name, params in (
            ("_RECORD_ACTIVATION", {"state": "active", "activated_at": T0, "activation_ms": 1.0, "lane_id_": 1}),
            ("_END_LANE", {"state": "released", "reason": "r", "ended_at": T0, "lane_id_": 1}),
        ):
            compiled = rawsql.compiled_for(conn, getattr(core, name), params)
            assert compiled is not None, name
            assert _guard(compiled.sql, "lanes.state") == CORE_GUARDS[name]
    engine.dispose()


def test_postgresql_statements_are_guarded_by_the_table() -> None:
    end, record = postgres._END.text, postgres._RECORD.text
    assert _guard(end, "locked.state") == states.sources(states.RELEASE, states.REVOKE)
    assert _guard(end, "was") == states.CARRIED  # the controllers are woken for these
    assert _guard(record, "lanes.state") == states.sources(states.RECORD)
    assert "SET state = :state," in end  # the value is ``states.ending``'s
    for sql in (end, record):  # no state of its own: every quoted state is one of the guards above
        quoted = set(re.findall(r"'(\w+)'", sql)) & set(states.STATES)
        assert quoted <= set(states.LIVE) | {states.ACTIVE}


# --- the statements move only what the table allows --------------------------------------------


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    d = Database(db_url)
    d.create_all()
    yield d
    d.dispose()


def _lane(port: int) -> LaneInput:
    return LaneInput(
        src_ip="10.1.0.10", dst_ip="203.0.113.10", protocol="tcp", dst_port=port, duration_s=600, purpose="test"
    )


def test_a_grant_revoke_ends_only_live_lanes_through_the_table(db: Database) -> None:
    dp = MemoryDataplane()
    topology = load_topology(REPO / "topologies" / "campus.yaml")
    with db.write() as s:
        _, token = store.create_principal(s, "alice", "researcher", T0)
        alice = store.caller_for_token(s, token)
        grant = store.create_grant(
            s,
            store.GrantInput(
                principal="alice",
                src_prefixes=["10.1.0.0/24"],
                dst_prefixes=["203.0.113.0/24"],
                protocols=["tcp"],
                ports=["9000-9100"],
                max_duration_s=3600,
                max_lanes=3,
            ),
            "root",
            T0,
        )
        grant_id = grant.id
    mgr = LaneManager(db, dp, topology, clock=lambda: T0)
    released, _ = mgr.request(alice, _lane(9000))
    live, _ = mgr.request(alice, _lane(9001))
    mgr.end(alice, released.id, "released")
    with db.write_connection() as conn:  # the guard: an ended lane is not ended again
        assert not core.end_lane(conn, released.id, states.ending("revoked", "again", T0 + 1))
    with db.write() as s:
        assert store.revoke_grant(s, grant_id, T0 + 2) == [live.id]
    mgr.revoke_lanes([live.id])
    with db.read() as s:
        first, ended = s.get(Lane, released.id), s.get(Lane, live.id)
        assert first is not None and ended is not None
        assert first.state == "released"
        assert (ended.state, ended.reason, ended.ended_at) == ("revoked", f"grant {grant_id} revoked", T0 + 2)
    assert dp.active == {}


# --- one writer ---------------------------------------------------------------------------------

PRODUCT = ("viplanes", "api", "policy", "authz", "topologies")
# controller/ is left out: import-linter forbids it the store, so it cannot write a lanes row.
OWNER = "viplanes/lanes/states.py"
# The SQL modules build their statements from the table; they may SET the state from a value.
SQL_MODULES = ("viplanes/store/lanesql/",)
# A migration is the schema of its time: it must not import the live table.
FROZEN = ("viplanes/store/migrations/",)
# ``X.state =`` on objects that are not lanes: a hand-off waiter (viplanes.cluster.handoff) says
# what it heard; ``self.state`` in a class other than ``Lane`` is that object's own field.
NOT_LANES = {"waiter.state"}
STATE_NAMES = set(LIVE + ENDS)


def _holds_state_literal(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in STATE_NAMES for n in ast.walk(node))


def _state_targets(target: ast.AST) -> list[ast.Attribute]:
    elts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
    return [t for t in elts if isinstance(t, ast.Attribute) and t.attr == "state"]


def _writes(path: Path, rel: str) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    sql_module = rel.startswith(SQL_MODULES)
    own_fields = {
        id(n)
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and cls.name != "Lane"
        for n in ast.walk(cls)
        if isinstance(n, ast.Attribute) and ast.unparse(n) == "self.state"
    }
    found = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for attr in (a for t in targets for a in _state_targets(t)):
                if ast.unparse(attr) not in NOT_LANES and id(attr) not in own_fields:
                    found.append(f"{where} assigns {ast.unparse(attr)}")
        elif isinstance(node, ast.keyword) and node.arg == "state" and _holds_state_literal(node.value):
            found.append(f"{where} passes state={ast.unparse(node.value)}")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "state" and _holds_state_literal(value):
                    found.append(f"{where} writes {{'state': {ast.unparse(value)}}}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "setattr" and len(node.args) >= 2:
            if isinstance(node.args[1], ast.Constant) and node.args[1].value == "state":
                found.append(f"{where} setattr(..., 'state', ...)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not sql_module and re.search(r"\bSET\s+state\b", node.value, re.IGNORECASE):
                found.append(f"{where} SQL text sets state")
            quoted = set(re.findall(r"'(\w+)'", node.value)) & STATE_NAMES
            if sql_module and quoted and re.search(r"\bstate\b", node.value):
                found.append(f"{where} SQL text names states {sorted(quoted)} itself")
        elif sql_module and isinstance(node, ast.Compare) and _holds_state_literal(node):
            found.append(f"{where} compares with a state literal: {ast.unparse(node)}")
    return found


def lane_state_writers(root: Path) -> list[str]:
    """Every place outside ``states.py`` that writes a lane's state itself."""
    found = []
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel != OWNER and not rel.startswith(FROZEN):
                found += _writes(path, rel)
    return found


def test_only_the_state_table_writes_lane_state() -> None:
    assert lane_state_writers(REPO) == []


def test_the_writer_check_sees_a_write(tmp_path: Path) -> None:
    """The check is not vacuous: each way the old code wrote a state is caught."""
    (tmp_path / "viplanes" / "store" / "lanesql").mkdir(parents=True)
    (tmp_path / "viplanes" / "w.py").write_text(
        "lane.state = dst\n"
        "lane.state, lane.activated_at = 'active', t\n"
        "values = {'state': 'failed'}\n"
        "row = dict(state='installing' if now else 'scheduled')\n"
        "update(Lane).values(state='revoked')\n"
        "setattr(lane, 'state', x)\n"
        "SQL = 'UPDATE lanes SET state = :to'\n"
        "waiter.state = heard\n"
        "class DoneWaiter:\n    def __init__(self):\n        self.state = None\n"
        "class Lane:\n    def end(self):\n        self.state = 'released'\n"
    )
    (tmp_path / "viplanes" / "store" / "lanesql" / "q.py").write_text(
        "A = update(LANES).where(LANES.c.state == 'installing')\nB = text(\"WHERE lanes.state = 'installing'\")\n"
    )
    found = lane_state_writers(tmp_path)
    assert len(found) == 10, found
