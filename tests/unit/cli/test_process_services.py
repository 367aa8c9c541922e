"""serve, the api workers and controller cluster build their parts from one settings object
through viplanes/cli/services.py: the same settings give the same lane limits everywhere."""

from __future__ import annotations

import pytest

from viplanes.cli import services
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.build import lane_limits
from viplanes.settings import Settings
from viplanes.store.db import Database

ENV = {
    "VIPLANES_MAX_LANE_MATCHES": "9",
    "VIPLANES_DNS_TTL_FLOOR_S": "7",
    "VIPLANES_DNS_TTL_CAP_S": "70",
    "VIPLANES_DNS_SERVER": "127.0.0.53:5353",
    "VIPLANES_AUTO_QUEUE": "12",
    "VIPLANES_SFLOW_WINDOW_S": "3",
    "VIPLANES_LANE_RETENTION_DAYS": "5",
    "VIPLANES_LEARN_SWITCH_FEATURES": "true",
}


def test_serve_api_and_controller_get_equal_settings_and_lane_limits(tmp_path) -> None:
    from viplanes.api.app import default_topology

    env = Settings.from_env(ENV)
    serve = services.load(f"sqlite:///{tmp_path}/v.db", api=True, migrate=True, env=env)
    api = services.load(f"sqlite:///{tmp_path}/v.db", api=True, migrate=False, env=env)
    controller = services.load(f"sqlite:///{tmp_path}/v.db", api=False, env=env)
    for ps in (api, controller):
        assert lane_limits(ps.app) == lane_limits(serve.app)
        assert (ps.retention, ps.auto, ps.sflow, ps.learn_features) == (
            serve.retention,
            serve.auto,
            serve.sflow,
            serve.learn_features,
        )
        assert ps.app.dns_server == "127.0.0.53:5353"
    assert lane_limits(serve.app).max_matches == 9 and lane_limits(serve.app).ttl_floor_s == 7.0

    topology = default_topology()
    app = services.app(serve, MemoryDataplane(), topology)
    served = app.extensions["viplanes"].manager
    db = Database(f"sqlite:///{tmp_path}/v.db")
    try:
        cluster = services.lane_service(controller, db, MemoryDataplane(), topology, lambda: 0.0)
        assert served.limits == cluster.limits == lane_limits(serve.app)
    finally:
        db.dispose()
        app.extensions["viplanes"].db.dispose()


def test_a_refused_setting_is_one_line_and_exit_78() -> None:
    from viplanes.cli.settingsload import BadSetting

    with pytest.raises(BadSetting) as err:  # OIDC's own check: an issuer needs an audience
        services.load(env=Settings.from_env({"VIPLANES_OIDC_ISSUER": "https://idp.example"}), api=True)
    assert err.value.exit_code == 78 and "audience" in err.value.message


def test_config_show_and_doctor_report_the_one_parse(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from viplanes.cli.main import main

    env = {"VIPLANES_CONFIG": str(tmp_path / "none.toml"), "VIPLANES_LEARN_SWITCH_FEATURES": "YES"}
    shown = CliRunner().invoke(main, ["config", "show"], env=env)
    assert shown.exit_code == 0 and "learn_features = true  # env VIPLANES_LEARN_SWITCH_FEATURES" in shown.output

    env["VIPLANES_AUTO_QUEUE"] = "lots"
    shown = CliRunner().invoke(main, ["config", "show"], env=env)
    line = "error: settings: VIPLANES_AUTO_QUEUE='lots': expected an integer >= 0"
    assert shown.exit_code == 78 and shown.output.strip() == line, shown.output
    args = ["doctor", "--db", f"sqlite:///{tmp_path}/v.db", "--api", "http://127.0.0.1:1", "--json"]
    checks = json.loads(CliRunner().invoke(main, args, env=env).output)["checks"]
    found = next(c for c in checks if c["check"] == "settings")
    assert found["status"] == "FAIL" and "VIPLANES_AUTO_QUEUE='lots'" in found["detail"], found
