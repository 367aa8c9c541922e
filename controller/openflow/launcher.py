"""Start os-ken 4.x apps ourselves: 4.x ships no `osken-manager`.

The OpenFlow listen address is an option (default 127.0.0.1:6653) rather than os-ken's
global default of every interface, so a lab controller is not reachable from outside by accident.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

DEFAULT_APPS = ("viplanes.controller.openflow.app",)
# How long a busy thread keeps the GIL when another wants it (CPython's default: 5 ms). A
# controller is many I/O threads (one per switch, the listener, the API's workers) beside a few
# CPU-bound ones (reconcile, drift, compiling a restart's lanes); at 5 ms a TLS handshake, which
# needs the GIL back after every read, took so long behind them that OVS dropped it (OVS gives
# a connection about 1 s) and retried after its backoff. At 0.5 ms a 140-switch restart has half
# the dropped handshakes and ends sooner, and the hot path does not change (docs/benchmarks.md).
SWITCH_INTERVAL_S = 0.0005
OFP_HANDLER = "os_ken.controller.ofp_handler"
_configured = False


def configure_osken(listen_host: str, listen_port: int) -> None:
    """Parse os-ken's oslo config once per process and point its OpenFlow server at our address."""
    global _configured
    from os_ken import cfg

    conf = cfg.CONF
    if not _configured:
        conf(args=[], project="os_ken")
        _configured = True
    conf.set_override("ofp_listen_host", listen_host)
    conf.set_override("ofp_tcp_listen_port", listen_port)


@dataclass
class RunningApps:
    """What `start_apps` started: the app instances by name and their threads."""

    manager: Any
    apps: dict[str, Any]
    threads: list[Any]

    def app(self, cls_name: str) -> Any:
        return next(a for a in self.apps.values() if type(a).__name__ == cls_name)

    def stop(self) -> None:
        self.manager.close()


def start_apps(
    app_modules: tuple[str, ...] | list[str], listen_host: str = "127.0.0.1", listen_port: int = 6653, **contexts: Any
) -> RunningApps:
    """Load, instantiate and start os-ken apps in this process (native threads); do not block."""
    from os_ken.base.app_manager import AppManager

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    configure_osken(listen_host, listen_port)
    manager = AppManager.get_instance()
    manager.load_apps(list(app_modules))
    # our listener: guards every message against parser loops and can be stopped (ofserver.py)
    from viplanes.controller.openflow.handler import GuardedOFPHandler

    manager.applications_cls[OFP_HANDLER] = GuardedOFPHandler
    ctx = manager.create_contexts()
    ctx.update(contexts)
    try:
        threads = manager.instantiate_apps(**ctx)
    except BaseException:
        manager.close()  # apps already started would keep the process alive
        raise
    for app in manager.applications.values():  # os-ken's event loops, named after their app
        for thread in app.threads:
            thread.name = f"osken-events-{app.name}"
    return RunningApps(manager=manager, apps=dict(manager.applications), threads=threads)
