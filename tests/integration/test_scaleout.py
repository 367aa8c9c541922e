"""The split deployment on real parts (issue 12): PostgreSQL, two `viplanes controller cluster`
processes, one `viplanes api --workers 2`, four userspace OVS bridges each connected over TLS to
both controllers (``set-controller BR ssl:A ssl:B``).

Lanes requested through the API become active with flows on the bridges; kill -9 of the master
hands the lease and the MASTER role to the other within seconds (measured), the lanes stay and
their flows are neither deleted nor re-added (same cookies, durations kept growing), and a new
lane request succeeds after the failover. A master paused past its lease (SIGSTOP) and resumed
finds itself SLAVE on every switch (the switch's own view, ``ovs-vsctl list controller``). kill -9 of
one API worker: the other serves, the parent starts a new one.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import requests

from tests.support.procs import wait_for
from tests.support.scaleout_kit import (
    api_workers,
    controller_roles,
    lane_flows,
    lease_holder_pid,
    request_active,
)
from tests.support.serve import setup_researcher

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_failover_keeps_lanes_and_the_deposed_master_cannot_write(cluster, record_property) -> None:
    url, db, bridges = cluster["url"], cluster["db"], cluster["bridges"]
    h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=20)}"}
    lanes = [request_active(url, h, 9000 + i, within_s=40) for i in range(3)]
    before = {ln["id"]: lane_flows(bridges[0], ln["id"]) for ln in lanes}
    assert all(before.values()), f"lane flows missing on {bridges[0]}: {before}"

    # kill -9 the master; the standby takes the lease and the switches, a new lane is installed
    ctl = {c.proc.pid: c for c in cluster["ctl"]}
    master_pid = lease_holder_pid(db)
    assert master_pid in ctl, (master_pid, list(ctl))
    standby = next(c for pid, c in ctl.items() if pid != master_pid)
    t_kill = time.monotonic()
    os.kill(master_pid, signal.SIGKILL)
    ctl[master_pid].proc.wait(5)
    after_kill = request_active(url, h, 9100, within_s=15)
    failover_s = time.monotonic() - t_kill
    record_property("failover_s", round(failover_s, 2))
    print(f"\nfailover: kill -9 of the master -> a new lane active in {failover_s:.2f} s")
    assert lease_holder_pid(db) == standby.proc.pid
    assert failover_s < 6.0
    elapsed = time.monotonic() - t_kill
    for ln in lanes:  # same flows (match, actions, cookie), never re-added: durations kept growing
        now = lane_flows(bridges[0], ln["id"])
        assert set(now) == set(before[ln["id"]]), (ln["id"], before[ln["id"]], now)
        for key, duration in now.items():
            assert duration >= before[ln["id"]][key] + elapsed - 1.0, (key, before[ln["id"]][key], duration)
    assert lane_flows(bridges[0], after_kill["id"])

    # the killed one restarts (same address) as standby; pause the master past its lease, resume it
    spare = cluster["controller"]("ctl-c", ctl[master_pid].of_port)
    spare_target = f"ssl:127.0.0.1:{spare.of_port}"
    assert wait_for(lambda: controller_roles(bridges[0]).get(spare_target) == "slave", 20), controller_roles(bridges[0])
    old_target = f"ssl:127.0.0.1:{standby.of_port}"
    os.kill(standby.proc.pid, signal.SIGSTOP)
    try:
        assert wait_for(lambda: lease_holder_pid(db) == spare.proc.pid, 10)
        assert wait_for(lambda: all(controller_roles(b).get(spare_target) == "master" for b in bridges), 10)
    finally:
        os.kill(standby.proc.pid, signal.SIGCONT)
    # the switches demoted the paused one themselves: whatever it still believes, it is SLAVE
    assert all(controller_roles(b).get(old_target) == "slave" for b in bridges)
    assert wait_for(lambda: "lost, now SLAVE" in standby.log.read_text(), 10)
    third = request_active(url, h, 9200, within_s=15)
    assert lane_flows(bridges[0], third["id"])
    for ln in lanes:
        assert set(lane_flows(bridges[0], ln["id"])) == set(before[ln["id"]])

    # kill -9 an API worker: the other serves meanwhile, the parent starts a new one
    workers = api_workers(cluster["api"].proc.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    fourth = request_active(url, h, 9300, within_s=10)
    assert wait_for(
        lambda: (
            len(api_workers(cluster["api"].proc.pid)) == 2 and workers[0] not in api_workers(cluster["api"].proc.pid)
        ),
        10,
    )
    assert lane_flows(bridges[0], fourth["id"])
    r = requests.post(f"{url}/api/v1/lanes/{third['id']}/release", headers=h, timeout=10)
    assert r.json()["state"] == "released"
    assert wait_for(lambda: not lane_flows(bridges[0], third["id"]), 5), "released lane's flows stayed"
