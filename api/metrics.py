"""Prometheus metrics with one registry per app (tests build many apps) and /healthz, /metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from flask import Blueprint, Response, current_app, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from viplanes.dataplane.base import Dataplane
from viplanes.domain.switchfacts import SwitchFacts
from viplanes.store.models import LANE_STATES

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _LanesByState(Collector):
    """Reads lane counts from the database at scrape time, so every process agrees."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        fam = GaugeMetricFamily("viplanes_lanes", "Lanes by state", labels=["state"])
        try:
            counts = self._counts()
        except Exception:  # a scrape must not fail because the database is busy
            counts = {}
        for state in LANE_STATES:
            fam.add_metric([state], counts.get(state, 0))
        yield fam


class _FlowBudgets(Collector):
    """Flow entries in use and allowed per switch (topologies: ``max_flows``), at scrape time."""

    def __init__(self, budgets: Callable[[], list[tuple[str, int | None, int]]]) -> None:
        self._budgets = budgets

    def collect(self) -> Iterator[GaugeMetricFamily]:
        used = GaugeMetricFamily("viplanes_switch_flows_used", "Flow entries base + live lanes need", labels=["switch"])
        limit = GaugeMetricFamily("viplanes_switch_flows_max", "The switch's max_flows", labels=["switch"])
        try:
            rows = self._budgets()
        except Exception:  # a scrape must not fail because the database is busy
            rows = []
        for switch, cap, n in rows:
            used.add_metric([switch], n)
            if cap is not None:
                limit.add_metric([switch], cap)
        yield used
        yield limit


class _SwitchFacts(Collector):
    """What switches said about themselves (``Dataplane.switch_facts``): the entries a switch held
    when it refused one for a full table, and how many contradictions of its profile it showed."""

    def __init__(self, rows: Callable[[], list[tuple[str, SwitchFacts, list[str]]]]) -> None:
        self._rows = rows

    def collect(self) -> Iterator[GaugeMetricFamily]:
        full = GaugeMetricFamily(
            "viplanes_switch_full_at", "Our entries a switch held when it refused one (TABLE_FULL)", labels=["switch"]
        )
        odd = GaugeMetricFamily(
            "viplanes_switch_profile_mismatches",
            "Contradictions of the profile in the switch's features",
            labels=["switch"],
        )
        for switch, facts, mismatches in self._rows():
            if facts.full_at is not None:
                full.add_metric([switch], facts.full_at)
            if facts.tables is not None:
                odd.add_metric([switch], len(mismatches))
        yield full
        yield odd


class _Links:
    """Declared links' live state and the re-routes around them (``Dataplane.readiness`` and
    ``Dataplane.reroutes``), at scrape time."""

    def __init__(self, dataplane: Dataplane) -> None:
        self._dataplane = dataplane

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily("viplanes_link_up", "1: the declared link carries lanes now", labels=["link"])
        for link in self._dataplane.readiness().get("links", []):
            up.add_metric([str(link.get("name"))], 1 if link.get("state") == "up" else 0)
        yield up
        count, seconds = self._dataplane.reroutes()
        yield CounterMetricFamily("viplanes_reroutes", "Changes of the usable links applied to the lanes", value=count)
        buckets = [(str(b), sum(1 for s in seconds if s <= b)) for b in _REROUTE_BUCKETS]
        yield HistogramMetricFamily(
            "viplanes_reroute_seconds",
            "Link report to new paths confirmed, the latest 1,000 re-routes",
            buckets=[*buckets, ("+Inf", len(seconds))],
            sum_value=sum(seconds),
        )


_REROUTE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.decisions = Counter(
            "viplanes_decisions", "Lane policy decisions", ["decision", "code"], registry=self.registry
        )
        self.activation_seconds = Histogram(
            "viplanes_activation_seconds",
            "Data-plane activation latency",
            ["outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "viplanes_lane_request_seconds",
            "Lane request latency inside the API (decision + activation)",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.auth_failures = Counter("viplanes_auth_failures", "Failed authentications", registry=self.registry)

    def watch_lanes(self, counts: Callable[[], dict[str, int]]) -> None:
        self.registry.register(_LanesByState(counts))

    def watch_budgets(self, budgets: Callable[[], list[tuple[str, int | None, int]]]) -> None:
        self.registry.register(_FlowBudgets(budgets))

    def watch_switch_facts(self, rows: Callable[[], list[tuple[str, SwitchFacts, list[str]]]]) -> None:
        self.registry.register(_SwitchFacts(rows))

    def watch_links(self, dataplane: Dataplane) -> None:
        self.registry.register(_Links(dataplane))

    def decision(self, code: str) -> None:
        self.decisions.labels("allow" if code == "allowed" else "deny", code).inc()

    def activation(self, seconds: float, ok: bool) -> None:
        self.activation_seconds.labels("ok" if ok else "failed").observe(seconds)


bp = Blueprint("meta", __name__)


def openflow_transport(dataplane: Dataplane) -> dict[str, Any]:
    """How switches reach the controller, for /healthz: an operator (or a monitor) must see a
    serve running with ``--insecure-tcp`` without reading its log. Empty without OpenFlow."""
    transport = dataplane.openflow_transport()
    if transport is None:
        return {}
    if transport == "insecure-tcp":
        return {
            "openflow": "insecure-tcp",
            "warnings": [
                "OpenFlow listens over plain TCP (--insecure-tcp): switches are "
                "not authenticated and the channel is not encrypted"
            ],
        }
    return {"openflow": "tls"}


@bp.route("/healthz")
def healthz() -> Any:
    ctx = current_app.extensions["viplanes"]
    transport = openflow_transport(ctx.dataplane)
    try:
        with ctx.db.read() as s:
            s.connection().exec_driver_sql("SELECT 1")
        return jsonify({"status": "ok", **transport})
    except Exception as exc:
        return jsonify({"status": "degraded", "database": str(exc)[:200], **transport}), 503


@bp.route("/metrics")
def metrics() -> Response:
    reg = current_app.extensions["viplanes"].metrics.registry
    return Response(generate_latest(reg), mimetype=CONTENT_TYPE_LATEST)
