"""doctor checks what the service runs: with only a [serve] table in the file, the PKI, topology
and pins are serve's (not "no --pki given" and the lab campus in site-packages); a deployment's
file that names no topology is refused by serve and FAILs in doctor; a switch not connected is
explained by its real cause (unknown datapath id, a refused certificate, TLS, plain TCP)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from tests.support.paths import REPO
from viplanes.cli.campusfile import bundled_campus, choose_topology
from viplanes.cli.doctor.service import api_url_of, service_view
from viplanes.cli.main import main
from viplanes.cli.switch_causes import not_connected

CLEAN = {"VIPLANES_DB_URL": None, "VIPLANES_PKI": None, "VIPLANES_CONFIG": None, "VIPLANES_API_URL": None}


def _config(tmp_path: Path, body: str) -> Path:
    cfg = tmp_path / "viplanes.toml"
    cfg.write_text(body)
    cfg.chmod(0o600)
    return cfg


def _doctor(cfg: Path) -> dict:
    r = CliRunner().invoke(main, ["--config", str(cfg), "doctor", "--json"], env=CLEAN)
    assert r.exit_code in (1, 4), r.output
    return {c["check"]: c for c in json.loads(r.output)["checks"]}


def test_a_serve_only_file_makes_doctor_check_serves_pki_and_topology(campus_pki: Path, tmp_path: Path) -> None:
    pki_dir = tmp_path / "pki"
    shutil.copytree(campus_pki, pki_dir)
    campus = tmp_path / "campus.yaml"
    shutil.copy2(REPO / "topologies" / "campus.yaml", campus)
    db = tmp_path / "v.db"
    assert CliRunner().invoke(main, ["db", "upgrade", "--db", f"sqlite:///{db}"], env=CLEAN).exit_code == 0
    cfg = _config(
        tmp_path,
        f'[serve]\npki = "{pki_dir}"\ntopology = "{campus}"\ndb = "sqlite:///{db}"\napi = "127.0.0.1:9"\n',
    )
    checks = _doctor(cfg)
    assert checks["pki"]["status"] == "ok" and str(pki_dir) in checks["pki"]["detail"], checks["pki"]
    assert checks["topology"]["detail"].startswith(f"{campus}:"), checks["topology"]
    assert checks["database"]["status"] == "ok" and str(db) in checks["database"]["detail"], checks["database"]
    assert "[serve] pki" in checks["config.service"]["detail"]
    assert "http://127.0.0.1:9 unreachable" in checks["switches"]["detail"]  # serve's API, not the default


def test_a_deployment_file_without_a_topology(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[serve]\napi = "127.0.0.1:9"\n')
    checks = _doctor(cfg)
    assert checks["topology"]["status"] == "FAIL", checks["topology"]
    assert "[serve] topology: not set" in checks["topology"]["detail"]
    r = CliRunner().invoke(main, ["--config", str(cfg), "serve", "--pki", str(tmp_path)], env=CLEAN)
    assert r.exit_code == 78 and "[serve] topology: not set" in r.output and "Traceback" not in r.output, r.output


def test_the_topology_rule() -> None:
    assert choose_topology("/x.yaml", Path("/etc/v.toml"), "serve", True).path == "/x.yaml"
    refused = choose_topology(None, Path("/etc/v.toml"), "serve", True)
    assert refused.path is None and "/etc/viplanes/campus.yaml" in refused.problem
    demo = choose_topology(None, Path("/etc/v.toml"), "serve", False)  # --dataplane memory
    assert demo.path == bundled_campus() and "bundled lab campus" in demo.warning
    lab = choose_topology(None, None, "serve", True)  # no config file: a developer's or the lab's shell
    assert lab.path == bundled_campus() and lab.warning


def test_doctor_explains_a_switch_from_recent_refusals_only(topo) -> None:
    from viplanes.cli.doctor.checks import check_switches

    report = {
        "switches": [{"dpid": sw.dpid, "connected": sw.name != "s2", "reconciled": True} for sw in topo.switches],
        "refused": [{"kind": "unknown_dpid", "dpid": 99, "reason": "not in topology", "at": 1000.0}],
    }
    (s2,) = [f for f in check_switches(topo, report, "test", wall=lambda: 1010.0) if f.status != "ok"]
    assert "dpid 99" in s2.detail and "other-config:datapath-id=0000000000000002" in s2.fix, s2
    (s2,) = [f for f in check_switches(topo, report, "test", wall=lambda: 5000.0) if f.status != "ok"]
    assert "dpid 99" not in s2.detail and "set-controller" in s2.fix, s2


def test_service_view_reads_serve_then_controller() -> None:
    view = service_view(
        {
            "serve": {"api": "0.0.0.0:8443", "tls_cert": "/c.crt", "topology": "/t.yaml"},
            "controller": {"pki": "/p", "insecure_tcp": True},
        }
    )
    assert view.values == {"topology_path": "/t.yaml", "pki_dir": "/p", "api_url": "https://127.0.0.1:8443"}
    assert view.origin["pki_dir"] == "[controller] pki" and view.insecure_tcp
    assert api_url_of("[::]:8080", False) == "http://[::1]:8080"


def test_a_switch_not_connected_is_explained_by_its_cause() -> None:
    unknown = [{"kind": "unknown_dpid", "dpid": 174275879763270, "reason": "not in topology campus"}]
    detail, fix = not_connected("s1", 1, unknown, insecure_tcp=False)
    assert "174275879763270" in detail and "other-config:datapath-id=0000000000000001" in fix
    own = [{"kind": "unauthorized", "dpid": 1, "reason": "certificate sha256 ab... is not pinned for switch s1"}]
    detail, fix = not_connected("s1", 1, own, insecure_tcp=False)
    assert "not pinned" in detail and "viplanes pki switch --name s1 --dpid 0x1" in fix
    tls = [{"kind": "tls", "dpid": None, "reason": "TLS handshake failed: TLSV1_ALERT_UNKNOWN_CA (the switch ...)"}]
    assert "UNKNOWN_CA" in not_connected("s1", 1, tls, insecure_tcp=False)[0]
    detail, fix = not_connected("s1", 1, [], insecure_tcp=True)
    assert "--insecure-tcp" in detail and "tcp:HOST:PORT" in fix and "TLS" not in fix
    detail, fix = not_connected("s1", 1, [], insecure_tcp=False)
    assert "ssl:HOST:PORT" in fix and "datapath-id=0000000000000001" in fix
