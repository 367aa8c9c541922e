"""A stopped runtime leaves no re-route worker behind: ``stop()`` ends it and waits for it (the
session's leftover check found a ``viplanes-reroute`` thread after every test that built an
``EmbeddedController``, stopped or not)."""

from __future__ import annotations

import threading
import time

from tests.support.topos import redundant_campus
from viplanes.controller.openflow.embedded import EmbeddedController
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.controller.runtime.reroute import REROUTE_THREAD


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == REROUTE_THREAD and t.is_alive()]


def _rerouting() -> LaneRuntime:
    """A runtime whose worker runs: a bypass link reported down kicks it."""
    before = set(_workers())
    rt = LaneRuntime(redundant_campus())
    rt.port_status(2, 3, False)
    deadline = time.monotonic() + 5
    while not set(_workers()) - before:
        assert time.monotonic() < deadline, "the re-route worker never started"
        time.sleep(0.01)
    return rt


def test_the_runtimes_stop_ends_its_reroute_worker() -> None:
    before = set(_workers())
    rt = _rerouting()
    rt.stop()
    assert set(_workers()) - before == set(), "the re-route worker outlived LaneRuntime.stop()"


def test_the_embedded_controllers_stop_ends_its_runtimes_reroute_worker() -> None:
    before = set(_workers())
    rt = _rerouting()
    EmbeddedController(rt).stop()  # never started: its switches are this process's fakes
    assert set(_workers()) - before == set(), "the re-route worker outlived EmbeddedController.stop()"


def test_stop_waits_for_a_reroute_under_way_and_no_report_restarts_the_worker() -> None:
    before = set(_workers())
    rt = LaneRuntime(redundant_campus())
    assert rt.reroute is not None
    busy = threading.Event()

    def slow_apply() -> bool:
        busy.set()
        time.sleep(0.5)  # a round waiting for its switches' barriers
        return True

    rt.reroute.apply_now = slow_apply  # type: ignore[method-assign]
    rt.port_status(2, 3, False)
    assert busy.wait(5), "the re-route never ran"
    rt.stop()
    assert set(_workers()) - before == set(), "stop() returned while a re-route was under way"
    rt.port_status(2, 3, True)  # a late report from the event thread
    time.sleep(0.05)
    assert set(_workers()) - before == set(), "a report after stop() started a new worker"
