"""os-ken's handshake app (``OFPHandler``) running our listener (``oflistener.OpenFlowServer``).

``launcher.start_apps`` swaps it in for ``os_ken.controller.ofp_handler`` (same app name, same
handshake handlers), and passes the listener's security as the ``of_security`` context.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller.ofp_handler import OFPHandler
from os_ken.lib import hub

from viplanes.controller.openflow.admission import ListenerSecurity
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.openflow.listener import OpenFlowServer
from viplanes.controller.openflow.server import FlowStatsHook

if TYPE_CHECKING:
    from viplanes.controller.openflow.events import SwitchEvents
    from viplanes.controller.runtime.refusals import RefusalLog

LOG = logging.getLogger("viplanes.controller.openflow.server")


class GuardedOFPHandler(OFPHandler):
    """os-ken's handshake app with our listener instead of ``OpenFlowController``.

    Its security comes in as the ``of_security`` context (``launcher.start_apps``); without it
    the listener is plain TCP."""

    def __init__(
        self,
        *args: Any,
        of_security: ListenerSecurity | None = None,
        of_handshakes: HandshakeGauge | None = None,
        switch_events: SwitchEvents | None = None,
        of_refusals: RefusalLog | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # flow-stats replies decoded on the connection's thread go straight to the events' owner
        self.flow_stats_hook: FlowStatsHook | None = switch_events.on_flow_stats if switch_events is not None else None
        self.server: OpenFlowServer | None = None
        self.security = of_security or ListenerSecurity(tls=None)
        self.handshakes = of_handshakes  # the runtime's: its reconciles wait for handshakes
        # the runtime's too: /readyz names the switches refused lately (refusals.py)
        self.refusals = of_refusals

    def start(self) -> Any:
        app_manager.OSKenApp.start(self)
        conf = cfg.CONF
        host = conf.ofp_listen_host or "127.0.0.1"
        self.server = OpenFlowServer(
            host,
            conf.ofp_tcp_listen_port or 6653,
            self.security,
            self.handshakes,
            self.flow_stats_hook,
            refusals=self.refusals,
        )
        if self.security.tls is None:
            LOG.warning(
                "INSECURE: OpenFlow listening on %s:%d over plain TCP (--insecure-tcp): switches are not authenticated",
                *self.server.address,
            )
            threading.Thread(target=self.server.remind_insecure, name="viplanes-insecure-of", daemon=True).start()
        else:
            LOG.info(
                "OpenFlow listening on %s:%d (TLS, client certificates from %s)",
                *self.server.address,
                self.security.tls.ca,
            )
        listener = hub.spawn(self.server.serve_forever)
        listener.name = "viplanes-of-listener"
        return listener

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        super().stop()
