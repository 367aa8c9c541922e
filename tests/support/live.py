"""The app served over real HTTP in this process (client and transfer tests)."""

from __future__ import annotations

from typing import Any


class LiveServer:
    """The app served by a real threaded waitress server on a free port, in this process."""

    def __init__(self, app: Any, threads: int = 8) -> None:
        import threading

        from waitress import create_server

        self.server = create_server(app, host="127.0.0.1", port=0, threads=threads, connection_limit=1000, backlog=1024)
        self.url = f"http://127.0.0.1:{self.server.effective_port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        server = self.server

        def close_all() -> None:  # runs inside the server's own loop thread: no select() race
            for channel in list(server._map.values()):  # listener, keep-alive connections, trigger
                try:
                    channel.close()
                except OSError:
                    pass
            server._map.clear()  # the run loop ends once its socket map is empty

        try:
            server.trigger.pull_trigger(close_all)
        except OSError:  # the trigger's pipe is already closed (the loop ended): close the rest here
            close_all()
        self.thread.join(5)
        server.task_dispatcher.shutdown()
