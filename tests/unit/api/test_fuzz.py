"""Random malformed bodies at every /api/v1 endpoint: the answer is never a 5xx.

schemathesis (test_api_schemathesis.py) generates bodies from the OpenAPI document, so it rarely
sends what the document cannot describe: lone surrogates, 10,000-deep nesting, NaN, numbers with
thousands of digits, bytes that are not UTF-8. This throws exactly those at every route.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.world import make_world

MAX_DEPTH = 32  # viplanes.api.bodies.MAX_DEPTH (imported lazily below, so this file runs on older code)


@pytest.fixture(scope="module")
def fuzz_world(tmp_path_factory, topo):
    from tests.support.clock import FakeClock
    from viplanes.dataplane.memory import MemoryDataplane

    w = make_world(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'f.db'}", FakeClock(), MemoryDataplane(), topo)
    w.lane()
    yield w
    w.app.extensions["viplanes"].db.dispose()


def routes(app) -> list[tuple[str, str]]:
    """Every (method, concrete path) under /api/v1, with path arguments filled in."""
    out = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1/"):
            continue
        path = rule.rule
        for arg in rule.arguments:
            path = path.replace(f"<int(max=2147483647):{arg}>", "1").replace(f"<{arg}>", "alice")
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            out.append((method, path))
    return out


json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)

SURROGATE = st.integers(0xD800, 0xDFFF).map(lambda c: f'"\\u{c:04x}"')
nasty_text = st.one_of(
    st.integers(MAX_DEPTH - 2, 20_000).map(lambda n: "[" * n + "]" * n),
    st.integers(MAX_DEPTH - 2, 5_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.builds(
        lambda key, s: json.dumps({key: "x"})[:-2] + s[1:-1] + '"}',
        st.sampled_from(["purpose", "name", "principal", "src_ip", "role"]),
        SURROGATE,
    ),
    st.builds(lambda s: '{"purpose": ' + s + "}", SURROGATE),
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            '{"rate_mbps": NaN}',
            '{"add_s": 1e999}',
            '{"duration_s": ' + "9" * 5000 + "}",
            "[" * 100,
            '{"a": 1,}',
            "\ufeff{}",
        ]
    ),
    json_values.map(json.dumps),
)
bodies = st.one_of(nasty_text.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=300))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_malformed_body_gets_a_5xx_anywhere(fuzz_world, data):
    method, path = data.draw(st.sampled_from(routes(fuzz_world.app)))
    body = data.draw(bodies)
    r = fuzz_world.client.open(
        path, method=method, data=body, headers={**fuzz_world.h("root"), "Content-Type": "application/json"}
    )
    assert r.status_code < 500, (method, path, body[:200], r.data[:300])
    if r.status_code >= 400:
        assert set(r.get_json()) == {"error", "message", "details"}


def test_max_depth_matches_the_api():
    from viplanes.api.bodies import MAX_DEPTH as api_depth

    assert api_depth == MAX_DEPTH


def test_every_body_route_is_in_the_fuzz(fuzz_world):
    posts = {p for m, p in routes(fuzz_world.app) if m == "POST"}
    assert {"/api/v1/lanes", "/api/v1/grants", "/api/v1/principals", "/api/v1/lanes/1/extend"} <= posts


def test_nesting_depth_ignores_brackets_inside_strings():
    from viplanes.api.bodies import nesting_depth

    assert nesting_depth('{"a": "[[[[[[", "b": [1, [2]]}') == 3
    assert nesting_depth('"\\"[[["') == 0
    assert nesting_depth("[" * 100_000, limit=32) == 33  # stops early, no recursion


@pytest.mark.parametrize(
    "raw",
    [b'"\\ud800"', b"[" * 40 + b"]" * 40, b"NaN", b'{"x": Infinity}', b"\xff", b'{"n": ' + b"1" * 5000 + b"}", b"[1,]"],
)
def test_parse_strict_refuses(raw):
    from viplanes.api.bodies import BadJson, parse_strict

    with pytest.raises(BadJson):
        parse_strict(raw)


def test_parse_strict_accepts_ordinary_json():
    from viplanes.api.bodies import parse_strict

    assert parse_strict('{"purpose": "Übertragung \\u00e9 😀", "n": [1, 2.5, null]}'.encode()) == {
        "purpose": "Übertragung é 😀",
        "n": [1, 2.5, None],
    }


def test_duplicate_keys_are_refused(fuzz_world):
    raw = b'{"src_ip": "10.1.0.10", "dst_ip": "203.0.113.10", "dst_ip": "10.1.0.20"}'
    r = fuzz_world.client.post(
        "/api/v1/lanes",
        data=raw,
        headers={
            **fuzz_world.h("root"),  # the fuzz
            "Content-Type": "application/json",
        },
    )  # rotated alice
    assert r.status_code == 400 and "duplicate key" in r.json["message"]


def test_api_answers_are_not_cached(fuzz_world):
    r = fuzz_world.client.post("/api/v1/principals/alice/rotate", headers=fuzz_world.h("root"))
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
