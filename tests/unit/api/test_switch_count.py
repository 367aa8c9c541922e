"""Cost per switch count through the whole API (issue 13): one researcher's request and release,
HTTP to the fake switches' barriers, must do the same work on a campus of 4 and of 128 access
switches. ``test_switch_count`` counts the runtime alone; this counts Flask, auth, policy, the
store and the runtime together, so a scan over switches or hosts anywhere on the request path
shows up here. Counts, not times: the machine's noise does not enter."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import pytest

from bench.harness.synth_campus import PATH_SWITCHES, campus_data, host_ip
from tests.support.apps import make_app
from tests.support.clock import FakeClock
from tests.support.fake_switches import FakeSwitches, inline_runtime
from tests.support.switch_cost import TEST_DOUBLES
from viplanes.store import records as store
from viplanes.topologies.loader import parse_topology


def calls_by_function(work: Any) -> Counter[str]:
    """Python function calls made while ``work()`` runs, per ``file:function`` (the fake switches'
    own calls left out)."""
    seen: Counter[str] = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "c_call"):
            return
        callers = (frame, frame.f_back) if frame.f_back is not None else (frame,)
        if any(part in f.f_code.co_filename for f in callers for part in TEST_DOUBLES):
            return
        if event == "c_call":
            seen[f"<c>:{getattr(arg, '__qualname__', arg)}"] += 1
        else:
            seen[f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_code.co_name}"] += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return seen


def api_cycle_calls(tmp_path: Any, access: int) -> tuple[Counter[str], set[int]]:
    """Calls of one POST /lanes + DELETE /lanes/N (after two warm-up cycles) on a synthetic
    campus of ``access`` access switches, from the last access switch's desktop."""
    topo = parse_topology(campus_data(access, hosts_per_access=1))
    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    runtime = inline_runtime(topo, clock, switches, base_flows=True)
    app = make_app(
        {"db_url": f"sqlite:///{tmp_path / f'sw{access}.db'}"}, dataplane=runtime, topology=topo, clock=clock
    )
    ctx = app.extensions["viplanes"]
    runtime.attach_source(ctx.manager.desired_lanes)
    src = host_ip(access - 1, 0)
    with ctx.db.write() as s:
        store.create_principal(s, "root", "operator", clock())
        token = store.create_principal(s, "alice", "researcher", clock())[1]
        store.create_grant(
            s,
            store.GrantInput(
                principal="alice",
                src_prefixes=[f"{src}/32"],
                dst_prefixes=["203.0.113.0/24"],
                protocols=["tcp"],
                ports=["5000-5999"],
                max_duration_s=3600,
                max_lanes=2,
            ),
            "root",
            clock(),
        )
    client = app.test_client()
    auth = {"Authorization": f"Bearer {token}"}

    def cycle(port: int) -> None:
        made = client.post(
            "/api/v1/lanes",
            headers=auth,
            json={
                "src_ip": src,
                "dst_ip": "203.0.113.10",
                "protocol": "tcp",
                "dst_port": port,
                "duration_s": 600,
                "purpose": "count",
            },
        )
        assert made.status_code == 201 and made.get_json()["state"] == "active", made.get_json()
        gone = client.post(f"/api/v1/lanes/{made.get_json()['id']}/release", headers=auth)
        assert gone.status_code == 200, gone.get_json()

    cycle(5000)
    cycle(5001)
    switches.sent.clear()
    counted = calls_by_function(lambda: cycle(5002))
    touched = {dpid for dpid, _ in switches.sent}
    ctx.db.dispose()
    return counted, touched


@pytest.mark.parametrize("large", [128])
def test_an_api_request_does_the_same_work_on_32x_the_switches(tmp_path, large):
    small, small_dpids = api_cycle_calls(tmp_path, 4)
    big, big_dpids = api_cycle_calls(tmp_path, large)
    assert len(small_dpids) == len(big_dpids) == PATH_SWITCHES
    grew = {name: (small[name], n) for name, n in big.items() if n > small[name] * 1.05 + 2}
    # the same request on a campus with 32x the switches and hosts: the same work, give or take
    # a few calls parsing longer address strings
    assert sum(big.values()) <= sum(small.values()) * 1.01, (
        sum(small.values()),
        sum(big.values()),
        sorted(grew.items())[:20],
    )
