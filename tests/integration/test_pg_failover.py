"""PostgreSQL fail-over to a promoted streaming replica while clients request lanes (issue 28,
item 6), on real parts: a primary and its synchronous replica (``tests/support/postgres.py``),
two ``controller cluster`` processes, ``api --workers 2`` and four OVS bridges
(``scaleout_kit``), every process given the one multi-host URL
``postgresql://...@primary,replica/db?target_session_attrs=read-write``.

The primary is crashed (``pg_ctl stop -m immediate``) and the replica promoted at once. Every
lane a client was told about (200/201) is still one active row with its flows afterwards, the
lanes carrying traffic before kept their flows untouched, failures were 503s only, and the time
from the crash to the first lane served again is printed (docs/operating.md quotes it).
On main no process could even start with that URL (SQLAlchemy's URL parser refused it).
"""

from __future__ import annotations

import time

import pytest

from tests.integration.test_scaleout_faults import (
    Load,
    check_flows_untouched,
    check_no_lane_lost_or_duplicated,
    failures,
    one_master,
    traffic_lanes,
)
from tests.support.postgres import replica_pair
from tests.support.procs import wait_for
from tests.support.scaleout_kit import scaleout_cluster
from tests.support.serve import setup_researcher

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_promoted_replica_under_requests_keeps_every_accepted_lane(tmp_path, request, record_property) -> None:
    with replica_pair() as pair, scaleout_cluster(pair, tmp_path, request) as cluster:
        url, db, bridges = cluster["url"], cluster["db"], cluster["bridges"]
        h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=250)}"}
        _, before = traffic_lanes(url, h, bridges[0], 2)
        t_before = time.monotonic()
        load = Load(url, h, threads=3, pause_s=0.15)
        clients = load.start()
        try:
            assert wait_for(lambda: load.successes_after(0) >= 3, 20), load.answers
            t_crash = time.monotonic()
            pair.crash_primary()
            pair.promote()
            t_promoted = time.monotonic()
            assert wait_for(lambda: load.successes_after(t_promoted) >= 3, 40), load.answers[-10:]
            assert wait_for(lambda: one_master(db, cluster["ctl"], bridges), 20), "no master after the fail-over"
        finally:
            load.stop.set()
            for c in clients:
                c.join(40)
        done_at = dict(load.spans)  # sent -> answered, per POST (sent times are unique floats)
        served = min(done_at[at] for at, status, _ in load.answers if at > t_crash and status in (200, 201))
        failed = failures(load)
        print(
            f"\nprimary crashed at 0, replica promoted +{t_promoted - t_crash:.2f} s, first lane served again "
            f"+{served - t_crash:.2f} s (answered; slowest answer after the crash "
            f"{load.slowest_from(t_crash):.2f} s); {len(load.accepted)} lanes accepted, failed answers "
            f"(s after the crash, status) {[(round(a[0] - t_crash, 2), a[1]) for a in failed][:20]}"
        )
        record_property("serve_again_s", round(served - t_crash, 2))
        assert all(status == 503 for _, status, _ in failed), failed  # never 500
        check_no_lane_lost_or_duplicated(db, bridges, load)
        check_flows_untouched(bridges[0], before, t_before)
