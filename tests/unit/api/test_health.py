"""/healthz says how switches reach the controller: a serve started with --insecure-tcp is visible
to a monitor, not only in the log."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from viplanes.controller.openflow.admission import ListenerSecurity
from viplanes.controller.openflow.embedded import EmbeddedController
from viplanes.controller.runtime.lane_runtime import LaneRuntime


def health(sqlite_url: str, topo, dataplane) -> tuple[int, dict]:
    from tests.support.apps import make_app

    app = make_app({"db_url": sqlite_url}, dataplane=dataplane, topology=topo)
    answer = app.test_client().get("/healthz")
    app.extensions["viplanes"].db.dispose()
    return answer.status_code, answer.json


def test_insecure_tcp_is_reported_with_a_warning(sqlite_url, topo) -> None:
    code, body = health(sqlite_url, topo, EmbeddedController(LaneRuntime(topo), port=0))  # never started
    assert code == 200 and body["status"] == "ok"
    assert body["openflow"] == "insecure-tcp"
    assert "--insecure-tcp" in body["warnings"][0]


def test_tls_is_reported_without_a_warning(sqlite_url, topo) -> None:
    tls = ListenerSecurity(tls=SimpleNamespace(ca="ca.crt", cert="c.crt", key="c.key"))
    code, body = health(sqlite_url, topo, EmbeddedController(LaneRuntime(topo), port=0, security=tls))
    assert code == 200 and body == {"status": "ok", "openflow": "tls"}


@pytest.mark.parametrize("plane", [None], ids=["memory"])
def test_without_openflow_nothing_is_added(sqlite_url, topo, plane) -> None:
    code, body = health(sqlite_url, topo, plane)
    assert code == 200 and body == {"status": "ok"}
