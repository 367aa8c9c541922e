"""`viplanes doctor` against a real `viplanes serve` with the lab's OVS campus over TLS: every
check ok (exit 0), then one bridge cut from the controller: that switch FAILs with its fix
(exit 4). Only this lab's own bridge is touched (never the shared vswitchd's settings)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.labcampus import VIPLANES, lab_campus
from tests.support.serve import bootstrap

pytestmark = pytest.mark.integration

GRANT = {
    "src_prefixes": ["10.1.0.0/24"],
    "dst_prefixes": ["203.0.113.0/24"],
    "protocols": ["tcp"],
    "ports": [9000],
    "max_duration_s": 600,
    "max_lanes": 1,
}


_OPERATORS: dict[str, str] = {}  # serve's database -> an operator's token for doctor


def operator_token(serve: Any) -> str:
    """An operator of this serve (made once): /readyz names nothing, /api/v1/readiness does."""
    if serve.db_url not in _OPERATORS:
        _OPERATORS[serve.db_url] = bootstrap(serve.db_url, "doctor")
    return _OPERATORS[serve.db_url]


def readiness(serve: Any) -> requests.Response:
    """The whole readiness report, as an operator reads it."""
    h = {"Authorization": f"Bearer {operator_token(serve)}"}
    return requests.get(f"{serve.url}/api/v1/readiness", headers=h, timeout=5)


def doctor(serve: Any) -> tuple[int, dict[str, Any]]:
    from viplanes.lab.labpki import ensure_lab_pki

    lab = ensure_lab_pki()
    args = ["doctor", "--json", "--db", serve.db_url, "--api", serve.url, "--pki", str(lab.dir)]
    args += ["--token", operator_token(serve)]
    done = subprocess.run(
        [*VIPLANES, *args, "--switch-cert-pin", lab.vswitchd_pin], capture_output=True, text=True, timeout=60
    )
    return done.returncode, json.loads(done.stdout)


def wait_ready(serve: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while requests.get(f"{serve.url}/readyz", timeout=5).status_code != 200:
        assert time.monotonic() < deadline, "lab campus not ready"
        time.sleep(0.3)


def test_doctor_green_on_the_lab_then_names_the_cut_switch(tmp_path: Path) -> None:
    with lab_campus(tmp_path, "alice", GRANT) as (net, serve, _token):
        wait_ready(serve)
        code, body = doctor(serve)
        bad = [c for c in body["checks"] if c["status"] != "ok"]
        assert code == 0 and body["status"] == "ok", bad
        names = {c["check"] for c in body["checks"]}
        assert {"database.schema", "database.permissions", "pki.controller.crt", "pki.pins", "clock"} <= names
        assert {f"switch {s.name}" for s in net.topology.switches} <= names

        victim = net.topology.switches[0].name
        subprocess.run(["ovs-vsctl", "del-controller", net.names[victim]], check=True, timeout=10)
        deadline = time.monotonic() + 15
        while True:
            code, body = doctor(serve)
            check = next(c for c in body["checks"] if c["check"] == f"switch {victim}")
            if check["status"] == "FAIL" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert code == 4 and body["status"] == "fail"
        assert check["status"] == "FAIL" and "set-controller" in check["fix"], check
        others = [c for c in body["checks"] if c["check"].startswith("switch ") and c["check"] != f"switch {victim}"]
        assert all(c["status"] == "ok" for c in others), others
