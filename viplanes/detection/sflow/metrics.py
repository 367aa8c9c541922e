"""Detection from the switches on /metrics: what the gate and the sample check refused, by reason
(``sflow_foreign_source``, ``sflow_foreign_agent``, ...), read at scrape time, so an operator
sees forged sFlow datagrams as they arrive."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from viplanes.detection.sflow.service import SflowDetection


class SflowCollector(Collector):
    def __init__(self, detection: SflowDetection) -> None:
        self._detection = detection

    def collect(self) -> Iterator[CounterMetricFamily]:
        refused = CounterMetricFamily(
            "viplanes_sflow_refused", "sFlow datagrams and samples refused, by reason", labels=["reason"]
        )
        guard = self._detection.guard
        for reason, n in sorted(dict(guard.counts).items() if guard is not None else ()):
            refused.add_metric([reason], n)
        yield refused
        marks = self._detection.marks
        if marks is not None:
            labels = CounterMetricFamily(
                "viplanes_flow_label_samples", "Sampled IPv6 flow labels, by outcome", labels=["outcome"]
            )
            for outcome, n in sorted(dict(marks.counts).items()):
                labels.add_metric([outcome], n)
            yield labels
        stats = self._detection.stats()
        samples = CounterMetricFamily(
            "viplanes_sflow_samples", "Samples the detector saw, by outcome", labels=["outcome"]
        )
        samples.add_metric(["observed"], stats.samples)
        samples.add_metric(["filtered"], stats.filtered)
        samples.add_metric(["sightings"], stats.sightings)
        yield samples
