"""The app served over real HTTP (or HTTPS) in this process (client and transfer tests)."""

from __future__ import annotations

import ssl
import threading
from typing import Any

from viplanes.cli.apiserver import ServerLimits, create_api_server


class LiveServer:
    """The app served by the API's own server (viplanes/cli/apiserver.py) on a free port, in a thread."""

    def __init__(self, app: Any, threads: int = 8, tls: ssl.SSLContext | None = None) -> None:
        self.server = create_api_server(app, "127.0.0.1", 0, tls, ServerLimits(threads=threads))
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.stop()
        self.thread.join(5)
