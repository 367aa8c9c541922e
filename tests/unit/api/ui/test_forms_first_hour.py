"""The console's first hour (issue 29): a refused form comes back with the user's values and each
error beside its field, in words; hints, not placeholders; minutes everywhere; a banner after a
new grant; a focus ring of at least 3:1 against what surrounds it (WCAG 1.4.11)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.support.ui import post, sign_in
from tests.support.world import World
from viplanes.store import records as store

ROOT = Path(__file__).resolve().parents[4]
TEMPLATES = ROOT / "api/ui/templates/ui"
CSS = (ROOT / "api/ui/static/console.css").read_text()

GRANT = {
    "principal": "bob",
    "src_prefixes": "10.1.0.20/32, 10.1.0",
    "dst_prefixes": "203.0.113.0/24",
    "protocols": ["udp"],
    "ports": "5201",
    "max_duration_min": "90",
    "max_lanes": "2",
    "max_rate_mbps": "",
}


def _field_error(page: str, name: str) -> str:
    m = re.search(rf'<span class="field-error" id="err-{name}">([^<]*)</span>', page)
    assert m, f"no error beside {name}"
    return html.unescape(m.group(1))


def test_a_refused_grant_comes_back_with_values_and_the_error_beside_the_field(world: World):
    sign_in(world.client, world.tokens["root"])
    r = post(world.client, "/ui/grants", GRANT)
    page = r.text
    assert r.status_code == 422
    assert _field_error(page, "src_prefixes").startswith("10.1.0: ")  # the bad entry, named
    assert "{0:" not in page and "[" not in _field_error(page, "src_prefixes")  # no validator repr
    assert "Back" not in page  # nothing to go back to: the form is here
    # every value typed is still there
    assert 'value="10.1.0.20/32, 10.1.0"' in html.unescape(page) and 'value="90"' in page
    assert 'value="udp" checked' in page and 'value="tcp" checked' not in page
    assert re.search(r'id="g-src" [^>]*aria-describedby="g-src-hint err-src_prefixes" aria-invalid="true"', page)
    assert "<option selected>bob</option>" in page


def test_a_grant_refused_by_the_campus_model_keeps_the_values_too(world: World):
    sign_in(world.client, world.tokens["root"])
    r = post(world.client, "/ui/grants", {**GRANT, "src_prefixes": "10.1.0.0/24", "dst_prefixes": "10.1.0.0/24"})
    assert r.status_code == 422 and "invalid_grant" in r.text and 'value="10.1.0.0/24"' in r.text


def test_grant_durations_are_minutes_and_a_banner_confirms(world: World):
    sign_in(world.client, world.tokens["root"])
    r = post(world.client, "/ui/grants", {**GRANT, "src_prefixes": "10.1.0.20/32"})
    assert r.status_code == 302 and r.headers["Location"].endswith("?created=1")
    gid = int(r.headers["Location"].split("?")[0].rsplit("/", 1)[1])
    with world.app.extensions["viplanes"].db.read() as s:
        assert store.get_grant(s, gid).max_duration_s == 90 * 60
    page = world.client.get(r.headers["Location"]).text
    assert f"Grant {gid} created: bob can request lanes" in page and 'role="status"' in page
    assert "Longest lane (minutes)" in page and 'value="90"' in page
    assert "seconds" not in world.client.get("/ui/grants").text.split("New grant")[1]
    r = post(world.client, f"/ui/grants/{gid}", {"max_duration_min": "ten", "max_lanes": "1", "valid_until": ""})
    assert r.status_code == 422 and "Not a valid integer" in _field_error(r.text, "max_duration_min")
    assert 'value="ten"' in r.text


def test_a_refused_lane_request_keeps_the_researchers_values(world: World):
    sign_in(world.client, world.tokens["alice"])
    gid = world.grants["alice"]
    form = {"grant": str(gid), "src_ip": "10.1.0.10", "dst_ip": "203.0.113.10", "protocol": "tcp"}
    r = post(world.client, "/ui/mine/request", {**form, "dst_port": "x1", "duration_min": "7", "purpose": "run 7"})
    assert r.status_code == 422 and _field_error(r.text, "dst_port") == "Not a valid integer."
    assert 'value="run 7"' in r.text and 'value="7"' in r.text and 'value="x1"' in r.text
    r = post(world.client, "/ui/mine/request", {**form, "dst_port": "22", "duration_min": "7", "purpose": "run 8"})
    assert r.status_code == 403 and "port_not_granted" in r.text and 'value="run 8"' in r.text


def test_a_taken_principal_name_is_shown_beside_the_name(world: World):
    sign_in(world.client, world.tokens["root"])
    r = post(world.client, "/ui/principals", {"name": "BOB", "role": "operator"})
    assert r.status_code == 409 and "already exists" in _field_error(r.text, "name")
    assert 'value="BOB"' in r.text and "<option selected>operator</option>" in r.text


def test_error_pages_speak_words_and_link_back(world: World):
    sign_in(world.client, world.tokens["root"])
    r = world.client.get("/ui/audit?lane=x", headers={"Referer": "http://localhost/ui/audit"})
    assert r.status_code == 422 and "Back button" not in r.text and "{" not in r.text.split("<main")[1]
    assert '<a href="/ui/audit">Return to the page you came from</a>' in r.text
    r = world.client.get("/ui/audit?lane=x", headers={"Referer": "https://evil.example/ui/x"})
    assert "Return to the page" not in r.text  # never a link off this console


@pytest.mark.parametrize("template", sorted(p.name for p in TEMPLATES.glob("*.html")))
def test_no_placeholders_that_look_like_values(template):
    assert "placeholder=" not in (TEMPLATES / template).read_text()


# --- the focus ring ----------------------------------------------------------------------------


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _var(name: str) -> str:
    m = re.search(rf"--{name}:\s*(#[0-9a-fA-F]{{6}})", CSS)
    assert m, name
    return m.group(1)


def _background(selector: str) -> str:
    m = re.search(rf"(?m)^{re.escape(selector)} \{{[^}}]*background: (#[0-9a-fA-F]{{6}}|var\(--[a-z-]+\))", CSS)
    assert m, selector
    value = m.group(1)
    return _var(value[6:-1]) if value.startswith("var(") else value


def test_contrast_formula():
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0 and contrast("#ffbf47", "#ffffff") < 1.7


def test_the_focus_ring_is_3_to_1_against_every_background_it_meets():
    assert ":focus-visible { outline: 3px solid var(--focus)" in CSS
    ring = _var("focus")
    light = {
        "page": _var("bg"),
        "panel": _var("panel"),
        "error": _background(".error"),
        "notice": _background(".notice"),
    }
    for where, bg in light.items():
        assert contrast(ring, bg) >= 3.0, (where, ring, bg, contrast(ring, bg))
    assert ".top :focus-visible, .skip:focus-visible { outline-color: var(--focus-on-dark); }" in CSS
    on_dark = _var("focus-on-dark")
    assert contrast(on_dark, _var("top")) >= 3.0 and _background(".top") == _var("top")
    print({k: round(contrast(ring, v), 1) for k, v in light.items()}, round(contrast(on_dark, _var("top")), 1))
