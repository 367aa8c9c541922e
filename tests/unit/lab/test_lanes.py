"""When the runner requests, keeps, renews and releases lanes (a fake service, no network)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from viplanes.lab.experiments import Runner, Session, Sweep, plan
from viplanes.lab.services import CloudServices
from viplanes.topologies.loader import load_topology


class FakeStack:
    def __init__(self, lifetime_s: float = 600) -> None:
        self.lifetime_s = lifetime_s
        self.log: list[tuple[str, object]] = []
        self.next_id = 1

    def request_lane(self, src_ip, dst_ip, dst_port, duration_s, purpose):
        lane = {
            "id": self.next_id,
            "src_ip": src_ip,
            "dst_port": dst_port,
            "state": "active",
            "expires_at": (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self.lifetime_s)).isoformat(),
        }
        self.next_id += 1
        self.log.append(("request", (src_ip, dst_port)))
        return lane

    def release_lane(self, lane_id):
        self.log.append(("release", lane_id))


def runner(campus_yaml: Path, stack: FakeStack) -> Runner:
    topo = load_topology(campus_yaml)
    svc = CloudServices("203.0.113.10", 5201, 9000, "lab", Path("/nonexistent"))
    sess = Session(topo, None, svc, stack, {}, Path("/nonexistent"), 8)  # type: ignore[arg-type]
    return Runner(sess, Path("/nonexistent"))


def walk(r: Runner, specs) -> None:
    for spec in specs:
        r._lanes_for(spec, specs, 300)
    r.release_lanes()


def test_one_lane_per_port_per_placement_released_when_done(campus_yaml):
    stack = FakeStack()
    r = runner(campus_yaml, stack)
    specs = plan(Sweep(placements=("desktop", "server", "dtn"), directions=("upload",)))
    walk(r, specs)
    requests = [x for kind, x in stack.log if kind == "request"]
    assert sorted(requests) == [("10.1.0.10", 5201), ("10.1.0.10", 9000), ("10.1.0.20", 5201), ("10.1.0.20", 9000)]
    releases = [x for kind, x in stack.log if kind == "release"]
    assert sorted(releases) == [1, 2, 3, 4] and not r.lanes
    # the desktop's lanes are gone before the server's are asked for
    first_server = stack.log.index(("request", ("10.1.0.20", 5201)))
    assert {("release", 1), ("release", 2)} <= set(stack.log[:first_server])


def test_no_lane_for_default_path_runs(campus_yaml):
    stack = FakeStack()
    walk(runner(campus_yaml, stack), plan(Sweep(paths=("default",))))
    assert stack.log == []


def test_expiring_lane_is_renewed(campus_yaml):
    stack = FakeStack(lifetime_s=30)  # shorter than a run plus the safety margin
    specs = plan(
        Sweep(placements=("desktop",), directions=("upload",), paths=("lane",), tools=("iperf3",), streams=(1, 4, 8))
    )
    walk(runner(campus_yaml, stack), specs)
    assert [kind for kind, _ in stack.log].count("request") == 3
