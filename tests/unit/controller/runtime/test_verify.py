"""Cabling verdicts from the probes' sightings (``verify.py``), on the redundant campus."""

from __future__ import annotations

from tests.support.paths import REPO
from viplanes.controller.runtime.verify import CablingVerifier
from viplanes.topologies.loader import load_topology

REDUNDANT = REPO / "topologies" / "campus-redundant.yaml"
GRACE = 5.0


def _verifier() -> CablingVerifier:
    topo = load_topology(REDUNDANT)
    links = {
        ln.name: ((topo.switch(ln.a.switch).dpid, ln.a.port), (topo.switch(ln.b.switch).dpid, ln.b.port))
        for ln in topo.links
    }
    return CablingVerifier(links, {ln.name: (str(ln.a), str(ln.b)) for ln in topo.links}, GRACE)


def test_a_link_seen_both_ways_is_verified_and_one_never_seen_is_not_after_the_grace() -> None:
    v = _verifier()
    for name in v.links():
        v.arm(name, 0.0)
    v.heard((5, 2), (6, 1), 1.0)  # s5:2 -> s6:1 and back
    v.heard((6, 1), (5, 2), 1.0)
    v.heard((5, 3), (7, 1), 1.0)  # s5:3-s7:1: one direction only
    assert v.judge(GRACE - 0.1) == {}  # start-up: nothing refused while the first probes fly
    verdicts = v.judge(GRACE)
    assert "s5:2-s6:1" not in verdicts
    assert verdicts["s5:3-s7:1"] == "not seen: no probe s7:1 -> s5:3 within 5 s"
    assert verdicts["s6:2-s3:6"] == "not seen: no probe s6:2 -> s3:6 or s3:6 -> s6:2 within 5 s"
    # it stays unverified, through a reconnect, until the probes prove it right
    v.disarm("s5:3-s7:1")
    v.arm("s5:3-s7:1", 10.0)
    assert v.judge(11.0) == {}
    v.heard((7, 1), (5, 3), 11.5)
    v.heard((5, 3), (7, 1), 11.6)
    assert v.judge(11.7) == {"s5:3-s7:1": ""}


def test_two_swapped_cables_name_both_links_with_declared_and_observed_ends() -> None:
    """s6's two cables exchanged: s5:2 reaches s6:2 and s3:6 reaches s6:1."""
    v = _verifier()
    for name in v.links():
        v.arm(name, 0.0)
    v.heard((5, 2), (6, 2), 1.0)
    v.heard((3, 6), (6, 1), 1.0)
    verdicts = v.judge(1.0)  # at once: no grace for a proven miscabling
    assert verdicts == {
        "s5:2-s6:1": "miscabled: probes from s5:2 arrive at s6:2; s6:1 hears s3:6 (declared s5:2 <-> s6:1)",
        "s6:2-s3:6": "miscabled: probes from s3:6 arrive at s6:1; s6:2 hears s5:2 (declared s6:2 <-> s3:6)",
    }
    v.heard((5, 2), (6, 2), 2.0)  # the next round says the same: no new verdict, no new log line
    v.heard((3, 6), (6, 1), 2.0)
    assert v.judge(2.0) == {}
    # recabled: the ports came up again and probes go the declared way
    for name in ("s5:2-s6:1", "s6:2-s3:6"):
        v.arm(name, 20.0)
    for a, b in (((5, 2), (6, 1)), ((6, 2), (3, 6))):
        v.heard(a, b, 20.5)
        v.heard(b, a, 20.5)
    verdicts = v.judge(20.6)  # (the links never probed in this test are "not seen" by now)
    assert (verdicts["s5:2-s6:1"], verdicts["s6:2-s3:6"]) == ("", "")


def test_a_sighting_at_a_port_that_ends_no_declared_link_changes_nothing() -> None:
    """A host's port (s5:1, the DTN's): its switch drops probes there (``linkprobe``); were one
    punted anyway, it names no link, so it can neither verify nor condemn one."""
    v = _verifier()
    for name in v.links():
        v.arm(name, 0.0)
    v.heard((5, 2), (5, 1), 1.0)
    v.heard((9, 9), (6, 1), 1.0)  # a sender that is no declared end
    assert v.judge(1.0) == {}
