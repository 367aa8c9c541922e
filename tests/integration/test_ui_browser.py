"""The console end to end in Debian's headless Chromium (Selenium + chromium-driver) against a real
`viplanes serve` with the lab's switches (Mininet + userspace OVS) and iperf3:

operator signs in (keyboard only), creates a researcher and a grant; the researcher signs in in a
second browser and requests a lane; both see it active with bytes rising while iperf3 runs; the
operator revokes it and it is gone from both pages and from the switches. Screenshots of the main
pages go to lab-results/ui-screenshots/ (VIPLANES_UI_SCREENSHOTS=docs/img refreshes the README's).
The second test reads every page at phone and desktop width. Driving the browser:
tests/support/browser.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import (
    OVERFLOW_JS,
    at_width,
    browser_wait,
    chrome,
    click_and_load,
    fill,
    labels_on_inputs,
    readable,
    sign_in_by_keyboard,
    text,
)
from tests.support.ovs import ovs_problem
from tests.support.paths import REPO
from tests.support.procs import free_port, stop_process, wait_healthy

pytestmark = pytest.mark.integration
# screenshots land in a scratch folder; VIPLANES_UI_SCREENSHOTS=docs/img refreshes the README's
IMG = REPO / os.environ.get("VIPLANES_UI_SCREENSHOTS", "lab-results/ui-screenshots")
VIPLANES = [sys.executable, "-m", "viplanes.cli.main"]
CLOUD = "203.0.113.10"
LANE_PORT = 5201


def serve_command(db_url: str, api_port: int, of_port: int) -> list[str]:
    """The one place this test says how `viplanes serve` starts: OpenFlow over TLS with the
    machine-wide lab PKI, which the lab's switches present."""
    from tests.support.procs import lab_security_args

    return [
        *VIPLANES,
        "serve",
        "--db",
        db_url,
        "--api",
        f"127.0.0.1:{api_port}",
        "--openflow",
        f"127.0.0.1:{of_port}",
        "--tick",
        "0.2",
        *lab_security_args(),
    ]


class Stack:
    def __init__(self, url: str, root_token: str, lab: Any) -> None:
        self.url, self.root_token, self.lab = url, root_token, lab

    def lane_flows_on_switches(self, lane_id: int) -> int:
        cookie = 0x5650 << 48 | lane_id
        total = 0
        for sw in ("s1", "s2", "s3"):
            out = self.lab.switch(sw).cmd(
                f"ovs-ofctl -O OpenFlow13 dump-flows {self.lab.bridge(sw)} cookie={cookie:#x}/-1"
            )
            total += len(re.findall(r"cookie=", out))
        return total


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    problem = ovs_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    from viplanes.lab.net import build_network
    from viplanes.topologies.loader import load_topology

    workdir = tmp_path_factory.mktemp("ui")
    db_url = f"sqlite:///{workdir / 'viplanes.db'}"
    root = (
        subprocess.run(
            [*VIPLANES, "principal", "add", "root", "--role", "operator", "--db", db_url],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    api_port, of_port = free_port(), free_port()
    url = f"http://127.0.0.1:{api_port}"
    log_path = workdir / "serve.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            serve_command(db_url, api_port, of_port),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env={**os.environ, "VIPLANES_UI_SECRET": "browser-test-secret"},
        )
    lab = None
    try:
        wait_healthy(proc, url, log_path, timeout=30)
        lab = build_network(load_topology(REPO / "topologies" / "campus.yaml"), "127.0.0.1", of_port, shape=True)
        yield Stack(url, root, lab)
    finally:
        try:
            if lab is not None:
                lab.stop()
        finally:
            stop_process(proc, 15)


@pytest.fixture(scope="module")
def browsers() -> Iterator[tuple[Any, Any]]:
    operator, researcher = chrome(), chrome()
    try:
        yield operator, researcher
    finally:
        operator.quit()
        researcher.quit()


def shot(driver: Any, name: str) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(IMG / f"console-{name}.png"))


def row_bytes(driver: Any, lane_id: int) -> int | None:
    from selenium.webdriver.common.by import By

    for row in driver.find_elements(By.CSS_SELECTOR, "#live-rows tr"):
        if f"Lane {lane_id}" in row.text:
            raw = row.find_element(By.CSS_SELECTOR, "td[data-bytes]").get_attribute("data-bytes")
            return int(raw) if raw else None
    return None


def iperf_in_background(stack: Stack, seconds: int) -> tuple[Any, Any]:
    cloud, desktop = stack.lab.host("cloud"), stack.lab.host("desktop")
    server = cloud.popen(
        ["iperf3", "-s", "-1", "-p", str(LANE_PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(50):
        if f":{LANE_PORT} " in cloud.cmd("ss -ltn"):
            break
        time.sleep(0.05)
    client = desktop.popen(
        ["iperf3", "-c", CLOUD, "-p", str(LANE_PORT), "-t", str(seconds)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return server, client


def test_grant_request_watch_revoke_in_two_browsers(stack: Stack, browsers: tuple[Any, Any]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    op, res = browsers
    t0 = time.monotonic()
    sign_in_by_keyboard(op, stack.url, stack.root_token)
    assert op.current_url.endswith("/ui/lanes#main")

    # a researcher and a grant, made in the console
    op.get(f"{stack.url}/ui/principals")
    fill(op, {"p-name": "alice"})
    click_and_load(op, By.CSS_SELECTOR, "form[aria-labelledby=new-principal] button")
    token = op.find_element(By.ID, "new-token").get_attribute("value")
    assert token.startswith("vl_")
    op.get(f"{stack.url}/ui/grants")
    Select(op.find_element(By.ID, "g-principal")).select_by_visible_text("alice")
    fill(
        op,
        {
            "g-src": "10.1.0.0/24",
            "g-dst": "203.0.113.0/24",
            "g-ports": "5201-5299",
            "g-lanes": "2",
            "g-dur": "60",
        },  # minutes
    )
    click_and_load(op, By.CSS_SELECTOR, "form[aria-labelledby=new-grant] button")
    assert "Grant 1" in text(op, By.TAG_NAME, "h1")
    op.get(f"{stack.url}/ui/lanes")  # stays open: the new lane must appear without a reload
    assert "No live lanes" in text(op, By.ID, "live-rows")

    # the researcher, in a second browser, requests a lane from the grant
    sign_in_by_keyboard(res, stack.url, token)
    assert res.current_url.endswith("/ui/mine#main")
    fill(res, {"port-1": str(LANE_PORT), "purpose-1": "nightly sync to cloud storage"})
    shot(res, "request")
    click_and_load(res, By.CSS_SELECTOR, "form[aria-labelledby=req-1] button")
    state = text(res, By.CSS_SELECTOR, "h1 .state")
    lane_id = int(re.search(r"/ui/lanes/(\d+)", res.current_url).group(1))
    assert state == "active", text(res, By.TAG_NAME, "main")

    # both see it live; bytes rise while iperf3 runs through the lane
    browser_wait(lambda: f"Lane {lane_id}" in text(op, By.ID, "live-rows"), 10, "the poll to show the lane")
    res.get(f"{stack.url}/ui/mine")
    server, client = iperf_in_background(stack, seconds=8)
    try:
        first = browser_wait(lambda: row_bytes(op, lane_id), 10, "bytes on the operator's page")
        rising = browser_wait(lambda: (row_bytes(op, lane_id) or 0) > first + 100_000, 12, "bytes to rise")
        assert rising
        browser_wait(lambda: (row_bytes(res, lane_id) or 0) > first, 10, "bytes on the researcher's page")
        shot(op, "lanes")
        shot(res, "mine")
        op.get(f"{stack.url}/ui/grants")
        assert f"/ui/lanes/{lane_id}" in op.page_source  # the grant lists the lane it covers
        shot(op, "grants")
        res.set_window_size(390, 844)  # a phone: the table becomes labelled cards (CSS only)
        res.get(f"{stack.url}/ui/mine")
        shot(res, "phone")
        res.set_window_size(1280, 800)
        res.get(f"{stack.url}/ui/mine")
    finally:
        client.wait(20)
        server.wait(10)
    assert stack.lane_flows_on_switches(lane_id) > 0
    op.get(f"{stack.url}/ui/lanes/{lane_id}")
    assert f"ipv4_dst={CLOUD}" in text(op, By.TAG_NAME, "main")  # its flows, from the switches
    shot(op, "lane")
    op.get(f"{stack.url}/ui/switches")
    assert text(op, By.TAG_NAME, "tbody").count("not connected") == 0
    shot(op, "switches")

    # drift: the lane's flows vanish from s2 behind the controller's back; the page names the
    # lane, "Reconcile now" puts them back
    on_switches = stack.lane_flows_on_switches(lane_id)
    op.get(f"{stack.url}/ui/drift")
    assert "No drift" in text(op, By.TAG_NAME, "main")
    stack.lab.switch("s2").cmd(
        f"ovs-ofctl -O OpenFlow13 del-flows {stack.lab.bridge('s2')} cookie={0x5650 << 48 | lane_id:#x}/-1"
    )
    op.get(f"{stack.url}/ui/drift")
    assert f"Lane {lane_id}: s2: " in text(op, By.TAG_NAME, "main")
    shot(op, "drift")
    click_and_load(op, By.XPATH, "//button[text()='Reconcile now']")
    assert "No drift" in text(op, By.TAG_NAME, "main")
    assert stack.lane_flows_on_switches(lane_id) == on_switches

    # the operator revokes (with confirmation); the lane leaves both pages and the switches
    op.get(f"{stack.url}/ui/lanes/{lane_id}")
    click_and_load(op, By.LINK_TEXT, "Revoke…")
    click_and_load(op, By.CSS_SELECTOR, "form button.danger")
    assert text(op, By.CSS_SELECTOR, "h1 .state") == "revoked"
    op.get(f"{stack.url}/ui/lanes")
    assert f"Lane {lane_id}" not in text(op, By.ID, "live-rows")
    browser_wait(
        lambda: f"Lane {lane_id}" not in text(res, By.ID, "live-rows"), 10, "the researcher's poll to drop the lane"
    )
    assert stack.lane_flows_on_switches(lane_id) == 0
    res.get(f"{stack.url}/ui/mine")
    assert "revoked by root" in text(res, By.TAG_NAME, "main")

    op.get(f"{stack.url}/ui/audit?lane={lane_id}")
    assert "lane.revoke" in text(op, By.TAG_NAME, "tbody")
    shot(op, "audit")
    print(f"\nbrowser flow took {time.monotonic() - t0:.1f} s")


def test_pages_are_readable_at_phone_and_desktop_width(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> None:
    import requests

    shots = tmp_path_factory.mktemp("ui-widths")
    h = {"Authorization": f"Bearer {stack.root_token}"}
    r = requests.post(
        f"{stack.url}/api/v1/principals", json={"name": "carol", "role": "researcher"}, headers=h, timeout=30
    )
    assert r.status_code in (201, 409), r.text
    grant = {
        "principal": "carol",
        "src_prefixes": ["10.1.0.0/24", "10.1.1.0/24"],
        "dst_prefixes": ["203.0.113.0/24", "192.0.2.128/25"],
        "protocols": ["tcp"],
        "ports": ["5201-5299", 443],
        "max_duration_s": 3600,
    }
    assert requests.post(f"{stack.url}/api/v1/grants", json=grant, headers=h, timeout=30).status_code == 201
    driver = chrome()
    try:
        sign_in_by_keyboard(driver, stack.url, stack.root_token)
        checks = {
            "switches": ("Connected", "Last reconcile"),
            "grants": ("Destinations", "Live lanes"),
            "audit": ("Reason", "Target"),
        }
        problems: list[str] = []
        for width in (1280, 390):
            at_width(driver, width)
            for page, selectors in checks.items():
                driver.get(f"{stack.url}/ui/{page}")
                scroll, client = driver.execute_script(OVERFLOW_JS)
                if not width - 20 <= client <= width:  # a desktop's scrollbar takes ~15 px
                    problems.append(f"{page}: viewport {client} px, not {width}")
                if scroll > client:
                    problems.append(f"{page} at {width}: the page is {scroll} px wide (scrolls sideways)")
                for column in selectors:
                    problems += [f"{page} at {width}: {p}" for p in readable(driver, column)]
                if page == "audit":
                    problems += [f"audit at {width}: {p}" for p in labels_on_inputs(driver, "form.filters")]
                driver.save_screenshot(str(shots / f"{page}-{width}.png"))
        print(f"\nscreenshots at 1280 and 390 px: {shots}")
        assert not problems, "\n".join(problems)
        head = "return getComputedStyle(document.querySelector('#switch-table thead')).display"
        driver.get(f"{stack.url}/ui/switches")
        assert driver.execute_script(head) == "none"  # on a phone: one card per switch
        at_width(driver, 1280)
        driver.get(f"{stack.url}/ui/switches")
        assert driver.execute_script(head) != "none"  # at a desk: the table as it was
    finally:
        driver.quit()
