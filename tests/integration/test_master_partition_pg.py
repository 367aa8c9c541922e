"""A master cut off from PostgreSQL (issue 28, item 5), on a real PostgreSQL.

The master controller's every database connection goes through a TCP proxy that the test
freezes: its queries are acknowledged and never answered, as behind a firewall dropping the
flow. Its switches stay reachable (fake switches answering like OVS, ``FakeSwitches``). A
standby on a direct connection takes the lease once it expires on the database's clock.

The master must step down on its own deadline (the lease thread is stuck in its renewal, so a
thread that never touches the database has to do it), and from that deadline on send no
flow-mod from any write path (activation, reconcile, drift repair, the hand-off sweep), counted
at its send function, until well after the partition heals. On main it stayed master until the
thaw and its paths wrote after the deadline; only the switches' refusal (generation_id) stood
between them and split-brain writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3_parser as parser

import viplanes.topologies as topologies_pkg
from tests.support.fake_switches import FakeSwitches, spec
from tests.support.procs import wait_for
from tests.support.tcpproxy import freezable_proxy
from viplanes.cluster.leader import LeaderLease
from viplanes.cluster.node import ControllerNode
from viplanes.controller.openflow.embedded import EmbeddedController
from viplanes.controller.openflow.roles import RoleController
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.lanes.manager import LaneManager
from viplanes.store.db import Database
from viplanes.topologies.loader import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


class CountedSwitches:
    """The fake switches behind a send function that stamps every flow-mod (monotonic time)."""

    def __init__(self, switches: FakeSwitches) -> None:
        self.switches = switches
        self.flow_mods: list[float] = []

    def send(self, dpid: int, ofmsgs: list[Any]) -> bool:
        now = time.monotonic()
        self.flow_mods += [now for m in ofmsgs if isinstance(m, parser.OFPFlowMod)]
        # role requests: the fake tables know none; the barrier after one is answered
        return self.switches.send(dpid, [m for m in ofmsgs if not isinstance(m, parser.OFPRoleRequest)])


def in_thread(fn: Callable[[], Any]) -> threading.Thread:
    """A write path in a thread of its own: one that reads the database hangs until the thaw."""

    def run() -> None:
        try:
            fn()
        except Exception:
            pass  # a refused or failed path is fine; a flow-mod is not

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_master_cut_off_from_the_database_stops_writing_at_its_deadline(pg_cluster, record_property) -> None:
    topo = load_topology(str(Path(topologies_pkg.__file__).resolve().parent / "campus.yaml"))
    url = pg_cluster.new_database()
    with freezable_proxy(pg_cluster.port) as proxy:
        master_db = Database(url.replace(f":{pg_cluster.port}/", f":{proxy.port}/"), pool_size=3)
        standby_db = Database(url, pool_size=2)
        runtime = LaneRuntime(topo)
        runtime.spawn = lambda fn: fn()  # reconciles inline: the test sees their writes at once
        roles = RoleController(runtime)
        plane = EmbeddedController(runtime, events=roles)  # never started: the fake switches' send
        switches = FakeSwitches(topo, clock=time.time)  # type: ignore[arg-type]
        switches.attach(runtime)
        counted = CountedSwitches(switches)
        runtime.send = counted.send
        manager = LaneManager(master_db, plane, topo)
        plane.attach_source(manager.desired_lanes)
        node = ControllerNode(master_db, plane, manager, tick_s=0.2, roles=roles)
        standby = LeaderLease(standby_db, "standby")
        try:
            node.lease.start()
            assert wait_for(lambda: plane.is_master, 10), "the master never led"
            # its first reconciles (base flows): the counter sees this master's writes
            assert wait_for(lambda: len(counted.flow_mods) > 0, 10), "the first reconcile wrote nothing"
            standby.start()
            time.sleep(1.0)  # a few renewals through the proxy
            assert plane.is_master and not standby.is_leader

            proxy.freeze()
            t_freeze = time.monotonic()
            deadline = node.lease._deadline  # local end of the last renewal that answered
            time.sleep(max(0.0, deadline - time.monotonic()) + 0.05)
            # every write path of the master, just after its deadline
            paths = [
                lambda: plane.activate(spec(7, now=time.time(), dst_port=9007)),
                roles.check_drift,
                lambda: runtime.reconcile_switch(1),
                roles.reconcile_all,
                node.sweep,
            ]
            threads = [in_thread(p) for p in paths]
            stepped_down = wait_for(lambda: not plane.is_master and node.scheduler is None, 8, step=0.01)
            t_down = time.monotonic()
            standby_led = wait_for(lambda: standby.is_leader, 8, step=0.02)
            t_standby = time.monotonic()
            time.sleep(1.0)
            proxy.thaw()
            t_thaw = time.monotonic()
            for thread in threads:
                thread.join(15)
            # the lease thread's hung renewal returns now; the standby holds the lease
            wait_for(lambda: node.lease.seen_epoch > node.lease.epoch or node.lease.epoch == standby.epoch, 10)
            time.sleep(1.5)
            late = [round(t - deadline, 3) for t in counted.flow_mods if t >= deadline]
            down_s = round(t_down - t_freeze, 2)
            down = f"+{down_s:.2f} s" if stepped_down else "never (before the thaw)"
            led = f"+{t_standby - t_freeze:.2f} s" if standby_led else "never"
            print(
                f"\nfrozen at 0: deadline +{deadline - t_freeze:.2f} s, master stepped down {down}, "
                f"standby led {led}, thaw +{t_thaw - t_freeze:.2f} s; flow-mods after the deadline: {len(late)}"
            )
            record_property("step_down_after_freeze_s", down_s)
            assert stepped_down and t_down <= deadline + 0.5, (down_s, deadline - t_freeze)
            assert standby_led
            assert late == [], f"{len(late)} flow-mods after the deadline (s after it: {late[:10]})"
            assert not plane.is_master and not node.lease.is_leader
        finally:
            proxy.thaw()
            node.lease.stop(release=False)
            standby.stop()
            runtime.stop()  # its re-route worker, had a port report started it
            master_db.dispose()
            standby_db.dispose()
