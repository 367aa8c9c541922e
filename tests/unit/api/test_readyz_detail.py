"""/readyz is open to anyone, so it says only ready or not and counts; the report that names
switches, links, refusals and the database's error is an operator's (``/api/v1/readiness``).
Before, anyone who reached the API read every switch's name and datapath id, each link's state
and why, and the causes of the switches refused lately."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.world import World

SECRETS = ("s1", "s2:3-s3:3", "miscabled", "certificate", "10.9.8.7", "dpid")


@pytest.fixture
def troubled(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """One switch connected, one refused for its certificate, one link miscabled."""

    def readiness() -> dict[str, Any]:
        return {
            "ready": False,
            "switches": [
                {"name": "s1", "dpid": 1, "connected": True, "reconciled": True},
                {"name": "s2", "dpid": 2, "connected": False, "reconciled": False},
            ],
            "refused": [{"at": 1.0, "cause": "certificate not signed by the campus CA", "peer": "10.9.8.7"}],
            "links": [
                {"name": "s1:3-s2:1", "state": "up", "reason": "", "bypass": False},
                {"name": "s2:3-s3:3", "state": "unverified", "reason": "miscabled", "bypass": True},
            ],
        }

    monkeypatch.setattr(world.dataplane, "readiness", readiness)
    return world


def test_anyone_reads_the_verdict_and_counts_only(troubled: World) -> None:
    r = troubled.client.get("/readyz")
    assert r.status_code == 503 and r.headers["Retry-After"] == "2"
    assert r.json == {
        "status": "not_ready",
        "ready": False,
        "database": "ok",
        "switches_ready": 1,
        "switches_total": 2,
        "links_usable": 1,
        "links_total": 2,
        "detail": "/api/v1/readiness (an operator's token)",
    }
    text = json.dumps(r.json)
    assert not [s for s in SECRETS if s in text], text


def test_an_operator_reads_the_whole_report_with_the_same_status(troubled: World) -> None:
    r = troubled.client.get("/api/v1/readiness", headers=troubled.h("root"))
    assert r.status_code == 503 and r.headers["Retry-After"] == "2"
    assert [sw["name"] for sw in r.json["switches"]] == ["s1", "s2"]
    assert r.json["links"][1]["reason"] == "miscabled" and "certificate" in r.json["refused"][0]["cause"]


@pytest.mark.parametrize(("who", "status"), [(None, 401), ("alice", 403)])
def test_nobody_else_reads_the_report(troubled: World, who: str | None, status: int) -> None:
    r = troubled.client.get("/api/v1/readiness", headers=troubled.h(who) if who else {})
    assert r.status_code == status and r.json["error"] in ("unauthorized", "forbidden"), r.json
    assert not [s for s in SECRETS if s in r.get_data(as_text=True)]


def test_a_database_error_is_not_shown_to_anyone(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> Any:
        raise RuntimeError("could not connect to server at db.internal.example:5432 as viplanes")

    monkeypatch.setattr(world.app.extensions["viplanes"].db, "read", broken)
    r = world.client.get("/readyz")
    assert r.status_code == 503 and r.json["database"] == "failing", r.json
    assert "db.internal" not in r.get_data(as_text=True)
