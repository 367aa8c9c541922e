"""Which lab switches sample: where campus hosts plug in, never the internet side."""

from __future__ import annotations

from tests.support.paths import REPO
from viplanes.lab.sflowlab import access_switches
from viplanes.topologies.loader import load_topology


def test_access_switches_of_the_campus() -> None:
    campus = load_topology(str(REPO / "topologies" / "campus.yaml"))
    # desktop and server at s1, the DTN at s3; the cloud's s4 is not the campus's
    assert access_switches(campus) == ["s1", "s3"]
