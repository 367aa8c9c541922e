"""Bad input always gets a JSON {error, message, details} with a 4xx, never a 500."""

from __future__ import annotations

import pytest

LANE = {
    "src_ip": "10.1.0.10",
    "dst_ip": "203.0.113.10",
    "protocol": "tcp",
    "dst_port": 9000,
    "duration_s": 600,
    "purpose": "x",
}


def shape(r, status, error=None):
    assert r.status_code == status, r.data
    body = r.get_json()
    assert set(body) == {"error", "message", "details"} and body["message"]
    if error:
        assert body["error"] == error
    return body


def test_malformed_json(world):
    r = world.client.post(
        "/api/v1/lanes", data='{"src_ip": ', headers={**world.h("alice"), "Content-Type": "application/json"}
    )
    shape(r, 400, "bad_request")


def test_wrong_content_type_is_a_validation_error(world):
    r = world.client.post(
        "/api/v1/lanes",
        data="src_ip=10.1.0.10",
        headers={**world.h("alice"), "Content-Type": "application/x-www-form-urlencoded"},
    )
    body = shape(r, 422, "invalid")
    assert "src_ip" in body["details"]["json"]


@pytest.mark.parametrize(
    "over,field",
    [
        ({"protocol": "icmp"}, "protocol"),
        ({"dst_port": 0}, "dst_port"),
        ({"dst_port": 2**40}, "dst_port"),
        ({"dst_port": "80"}, "dst_port"),
        ({"duration_s": -1}, "duration_s"),
        ({"src_ip": "10.1.0"}, "src_ip"),
        ({"purpose": "a\x00b"}, "purpose"),
        ({"purpose": ""}, "purpose"),
        ({"rate_mbps": 1e12}, "rate_mbps"),
        ({"start_at": "yesterday"}, "start_at"),
        ({"extra": 1}, "extra"),
        ({"dst_ip": None}, "dst_ip"),
    ],
)
def test_field_validation(world, over, field):
    body = shape(world.client.post("/api/v1/lanes", json={**LANE, **over}, headers=world.h("alice")), 422, "invalid")
    assert field in body["details"]["json"]


def test_json_that_is_not_an_object(world):
    for payload in ([], "x", 3, None):
        r = world.client.post("/api/v1/lanes", json=payload, headers=world.h("alice"))
        assert r.status_code in (400, 422) and set(r.get_json()) == {"error", "message", "details"}


def test_naive_start_at_is_utc(world):
    import datetime as dt

    from tests.support.clock import T0

    naive = dt.datetime.fromtimestamp(T0 + 60, dt.UTC).replace(tzinfo=None).isoformat()
    r = world.client.post("/api/v1/lanes", json={**LANE, "start_at": naive}, headers=world.h("alice"))
    assert r.status_code == 201 and r.json["state"] == "scheduled" and r.json["starts_at"].endswith("+00:00")


def test_extreme_dates_are_refused_not_crashing(world):
    for when in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        r = world.client.post("/api/v1/lanes", json={**LANE, "start_at": when}, headers=world.h("alice"))
        assert 400 <= r.status_code < 500
        g = world.client.post(
            "/api/v1/grants",
            json={
                "principal": "bob",
                "src_prefixes": ["10.1.0.20"],
                "dst_prefixes": ["0.0.0.0/0"],
                "protocols": ["tcp"],
                "ports": [1],
                "max_duration_s": 5,
                "valid_until": when,
            },
            headers=world.h("root"),
        )
        assert g.status_code in (201, 422)


def test_grant_body_errors(world):
    base = {
        "principal": "bob",
        "src_prefixes": ["10.1.0.20/32"],
        "dst_prefixes": ["0.0.0.0/0"],
        "protocols": ["tcp"],
        "ports": [443, "9000-9100"],
        "max_duration_s": 60,
    }
    ok = world.client.post("/api/v1/grants", json=base, headers=world.h("root"))
    assert ok.status_code == 201 and ok.json["ports"] == ["443", "9000-9100"] and ok.json["max_lanes"] == 1
    for over in (
        {"ports": ["9100-9000"]},
        {"ports": [True]},
        {"src_prefixes": ["10.1.0.1/24"]},
        {"protocols": ["sctp"]},
        {"max_lanes": 0},
    ):
        shape(world.client.post("/api/v1/grants", json={**base, **over}, headers=world.h("root")), 422)
    shape(
        world.client.post("/api/v1/grants", json={**base, "principal": "nobody"}, headers=world.h("root")),
        404,
        "not_found",
    )


def test_unknown_routes_methods_and_ids(world):
    shape(world.client.get("/api/v1/nothing", headers=world.h("alice")), 404, "not_found")
    shape(world.client.delete("/api/v1/lanes", headers=world.h("alice")), 405, "method_not_allowed")
    shape(world.client.get("/api/v1/lanes/99999999999999999999", headers=world.h("alice")), 404)
    shape(world.client.get("/api/v1/lanes/424242", headers=world.h("alice")), 404, "not_found")
    shape(world.client.post("/api/v1/principals/bad%00name/rotate", headers=world.h("root")), 404)


def test_auth_errors(world):
    shape(world.client.get("/api/v1/lanes"), 401, "unauthorized")
    r = world.client.get("/api/v1/lanes", headers={"Authorization": "Basic abc"})
    shape(r, 401)
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_body_too_large(world):
    r = world.client.post(
        "/api/v1/lanes",
        data="{" + " " * 100_000 + "}",
        headers={**world.h("alice"), "Content-Type": "application/json"},
    )
    shape(r, 413)


def test_existing_principal_is_409(world):
    r = world.client.post("/api/v1/principals", json={"name": "alice", "role": "operator"}, headers=world.h("root"))
    shape(r, 409, "principal_exists")


def test_openapi_document(world):
    doc = world.client.get("/api/v1/openapi.json").json
    assert doc["openapi"].startswith("3.") and doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    req = doc["components"]["schemas"]["LaneRequest"]
    # issue 11: a destination is one of dst_ip/dst_prefix/dst_host, a port one of dst_port/dst_ports
    assert set(req["required"]) == {"src_ip", "protocol", "duration_s", "purpose"}
    assert {"dst_ip", "dst_prefix", "dst_host", "dst_port", "dst_ports"} <= set(req["properties"])
    assert {"start_at", "src_port", "rate_mbps"} <= set(req["properties"])


def test_database_outage_is_503_json(world, monkeypatch):
    from sqlalchemy.exc import OperationalError

    def down(*_a, **_k):
        raise OperationalError("SELECT 1", {}, Exception("could not connect"))

    monkeypatch.setattr(world.app.extensions["viplanes"].manager, "list", down)
    body = shape(world.client.get("/api/v1/lanes", headers=world.h("alice")), 503, "database_unavailable")
    assert "unavailable" in body["message"]
