"""The write side of one switch connection: a change's messages leave as one buffer.

A mixin of ``ofserver.GuardedDatapath`` (before os-ken's ``Datapath`` in its bases, so its
``_send_loop`` is the one that runs). os-ken queues each message for a send thread; a lane change
of nine messages was nine queue puts and nine GIL hand-offs. Here a batch is serialised once and
written on the caller's thread when nothing is queued ahead of it, else queued as one buffer.
``_write_lock`` keeps the two writers (caller, send thread) from interleaving on the socket.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from os_ken.controller.handler import DEAD_DISPATCHER
from os_ken.lib import hub

LOG = logging.getLogger("viplanes.controller.openflow.server")


class BatchWriter:
    """``send_msgs``/``serialize_batch``/``write_batch`` and the send loop they share a lock with.

    Uses the connection's ``send_q``, ``_send_q_sem``, ``socket``, ``send`` and ``_close_write``
    (os-ken's ``Datapath``), and ``_write_lock``, ``_stopping`` and ``shutdown`` (the datapath's)."""

    # os-ken's Datapath and GuardedDatapath provide these
    send_q: Any
    _send_q_sem: Any
    socket: Any
    state: Any
    address: Any
    id: Any
    _write_lock: Any
    _stopping: Any
    set_xid: Any
    send: Any
    shutdown: Any
    _close_write: Any

    def send_msgs(self, msgs: Sequence[Any]) -> bool:
        """Serialise ``msgs`` in order and queue them as one buffer; False when the connection is
        closing (then nothing of the batch was queued).

        ``send_msg`` per message means one send-queue put, i.e. one wake-up of the send thread and
        one GIL hand-off, per message (9 for an activation). Xids already set are kept, so the
        barrier/xid tracking of ``LaneRuntime`` sees exactly the xids it assigned.
        """
        return self.write_batch(self.serialize_batch(msgs))

    def serialize_batch(self, msgs: Sequence[Any]) -> bytes:
        """The batch's bytes (xids kept or set here): done for every switch of a change before
        the first is written (``VipLanesApp.send_many``), so no write's GIL release lets a reader
        in between two switches' serialisations."""
        chunks = []
        for msg in msgs:
            msg.datapath = self
            if msg.xid is None:
                self.set_xid(msg)
            msg.serialize()
            chunks.append(msg.buf)
        return b"".join(chunks)

    def write_batch(self, data: bytes) -> bool:
        """Write ``data`` on the calling thread when nothing is queued or being written (then
        nothing can be overtaken): the switch starts on it at once, without a hand-off to the
        send thread. Otherwise it queues behind what is there, as ``send`` does. False when the
        connection is closing."""
        queue = self.send_q
        if queue is not None and self._write_lock.acquire(blocking=False):
            try:
                # unfinished_tasks: buffers queued and not yet written (the send loop marks each
                # done after writing it, under the same lock)
                if queue.unfinished_tasks == 0 and self.send_q is queue and not self._stopping.is_set():
                    try:
                        self.socket.sendall(data)
                        return True
                    except OSError:  # timed out or broken mid-batch: the stream is unusable
                        LOG.warning(
                            "closing OpenFlow connection from %s (dpid=%s): write failed", self.address, self.id
                        )
                        self.shutdown()
                        return False
            finally:
                self._write_lock.release()
        return bool(self.send(data))

    def _send_loop(self) -> None:
        """os-ken's send loop, each buffer written under ``_write_lock`` and then marked done."""
        queue = self.send_q
        try:
            while self.state != DEAD_DISPATCHER and queue is not None:
                buf, close_socket = queue.get()
                self._send_q_sem.release()
                try:
                    with self._write_lock:
                        self.socket.sendall(buf)
                finally:
                    queue.task_done()
                if close_socket:
                    break
        except OSError as exc:  # socket.timeout included
            LOG.debug("send to switch at %s failed: %s", self.address, exc)
        finally:
            self.send_q = None  # no new references; then release every waiting sender
            try:
                while queue is not None and queue.get(block=False):
                    self._send_q_sem.release()
            except hub.QueueEmpty:
                pass
            self._close_write()
