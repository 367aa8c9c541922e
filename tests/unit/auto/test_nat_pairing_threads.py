"""The detector's thread notes post-NAT sightings while the worker pairs a pre-NAT one: the
pairing table is shared. Without one lock around both, the worker's pass over the table met it
changing under it (KeyError, "OrderedDict mutated during iteration") and the sighting was lost as an error;
a flood of post-NAT samples (forged sFlow is unauthenticated UDP) made that likely."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from tests.support.world import World
from tests.unit.auto.conftest import Mono, set_policy
from tests.unit.auto.test_nat_takeover import NAT_BOX, sampled
from viplanes.auto.acceptor import Acceptor
from viplanes.domain.sighting import Sighting


@pytest.fixture
def fast_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("fast_switching")
def test_pairing_while_the_detector_notes_loses_no_sighting(world: World, mono: Mono) -> None:
    acc = Acceptor(world.app.extensions["viplanes"].manager, clock=mono)
    assert set_policy(world, min_rate_mbps=1).status_code == 200
    acc.refresh()
    stop = threading.Event()

    def flood() -> None:  # the detector's thread: post-NAT samples, ever new ports (table churns)
        port = 1024
        while not stop.is_set():
            s = sampled(NAT_BOX, port)
            assert isinstance(s, Sighting)
            acc.offer(s)
            port = port + 1 if port < 65000 else 1024

    for _ in range(400):  # fill the table (1,024 candidates) before pairing
        acc.offer(sampled(NAT_BOX, 2000 + _))  # type: ignore[arg-type]
    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    errors: list[BaseException] = []
    try:
        for _ in range(40):
            try:
                acc.handle(sampled())  # type: ignore[arg-type]
            except (RuntimeError, KeyError) as exc:  # what the unlocked table raised
                errors.append(exc)
    finally:
        stop.set()
        flooder.join(5)
    assert errors == [] and acc.counts["errors"] == 0
    assert acc.counts["nat_ambiguous"] == 40  # every sighting judged (many candidates alike)
