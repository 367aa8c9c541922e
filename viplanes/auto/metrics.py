"""The acceptor's and the firefly listener's counters as Prometheus metrics, read at scrape time:
every refusal has a reason label, so an operator sees spoofed or flooding fireflies on /metrics."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from viplanes.auto.service import Automation


class AutomationCollector(Collector):
    def __init__(self, automation: Automation) -> None:
        self._auto = automation

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        sightings = CounterMetricFamily(
            "viplanes_auto_sightings", "Sightings offered to the acceptor, by outcome", labels=["outcome"]
        )
        for outcome, n in sorted(dict(self._auto.acceptor.counts).items()):
            sightings.add_metric([outcome], n)
        yield sightings
        held = GaugeMetricFamily("viplanes_auto_nat_held", "NAT'd sightings waiting for their post-NAT pair")
        held.add_metric([], self._auto.acceptor.nat_held)
        yield held
        refreshes = CounterMetricFamily(
            "viplanes_auto_grant_index_refreshes", "Times the acceptor rebuilt its grant index from the database"
        )
        refreshes.add_metric([], self._auto.acceptor.refreshes)
        yield refreshes
        indexed = GaugeMetricFamily("viplanes_auto_grants_indexed", "Automatic grants in the acceptor's index now")
        indexed.add_metric([], self._auto.acceptor.indexed_grants)
        yield indexed
        idle = CounterMetricFamily("viplanes_auto_ended", "Automatic lanes ended by the idle sweep")
        idle.add_metric([], self._auto.ender.ended)
        yield idle
        if self._auto.listener is not None:
            datagrams = CounterMetricFamily(
                "viplanes_firefly_datagrams", "Firefly datagrams received, by outcome", labels=["outcome"]
            )
            for outcome, n in sorted(dict(self._auto.listener.counts).items()):
                datagrams.add_metric([outcome], n)
            yield datagrams
