"""``/metrics`` of a ``controller cluster`` process (``--metrics HOST:PORT``): whether it is the
master, its switches, and, while it is master, the automation counters ``serve`` shows on the
API's ``/metrics`` (the acceptor's sightings, fireflies, sFlow refusals). In the split deployment
those run only on the master (viplanes/auto/role.py), so without this an operator could not see a
forged firefly or sFlow datagram anywhere. Read at scrape time; nothing here writes.

Served by prometheus_client's own HTTP server on a thread named ``viplanes-controller-metrics``;
loopback by default, TLS (the given certificate and key) required on any other address, as for
the API (viplanes/cli/https.py)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from viplanes.auto.metrics import AutomationCollector
from viplanes.auto.role import AutomationRole
from viplanes.detection.sflow.metrics import SflowCollector


class RolePlane(Protocol):
    """What the collector reads of ``controller/openflow/roles.py:RoleController``."""

    @property
    def is_master(self) -> bool: ...

    @property
    def epoch(self) -> int: ...

    def readiness(self) -> dict[str, Any]: ...


class ControllerCollector(Collector):
    def __init__(self, plane: RolePlane, role: AutomationRole | None) -> None:
        self._plane, self._role = plane, role

    def collect(self) -> Iterator[Metric]:
        master = GaugeMetricFamily("viplanes_controller_master", "1 while this controller holds the lease")
        master.add_metric([], 1.0 if self._plane.is_master else 0.0)
        yield master
        epoch = GaugeMetricFamily("viplanes_controller_epoch", "The lease epoch this controller last acted under")
        epoch.add_metric([], float(self._plane.epoch))
        yield epoch
        connected = GaugeMetricFamily(
            "viplanes_controller_switch_connected", "1 while the switch is connected", labels=["switch"]
        )
        reconciled = GaugeMetricFamily(
            "viplanes_controller_switch_reconciled", "1 once the switch's flows match the lanes", labels=["switch"]
        )
        for sw in self._plane.readiness().get("switches", []):
            connected.add_metric([str(sw["name"])], 1.0 if sw["connected"] else 0.0)
            reconciled.add_metric([str(sw["name"])], 1.0 if sw["reconciled"] else 0.0)
        yield connected
        yield reconciled
        role = self._role
        automation, detection = (role.automation, role.detection) if role is not None else (None, None)
        if automation is not None:  # master: the same families as serve's /metrics
            yield from AutomationCollector(automation).collect()
        if detection is not None:
            yield from SflowCollector(detection).collect()


class MetricsServer:
    """The scrape endpoint; ``stop`` closes its socket."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry, cert: Path | None, key: Path | None) -> None:
        tls = {"certfile": str(cert), "keyfile": str(key), "tls_min_version": ssl.TLSVersion.TLSv1_2} if cert else {}
        self._server, thread = start_http_server(port, host, registry, **tls)  # type: ignore[arg-type]
        thread.name = "viplanes-controller-metrics"
        self._thread: threading.Thread = thread
        self.port = self._server.server_address[1]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
