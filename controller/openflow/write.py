"""The write side of one switch connection: a change's messages leave as one buffer.

A collaborator of ``server.GuardedDatapath``, which holds one (``writer``) and runs its
``send_loop`` as the connection's send thread. os-ken queues each message for a send thread; a
lane change of nine messages was nine queue puts and nine GIL hand-offs. Here a batch is
serialised once and written on the caller's thread when nothing is queued ahead of it, else
queued as one buffer. ``lock`` keeps the two writers (caller, send thread) from interleaving on
the socket.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from os_ken.controller.handler import DEAD_DISPATCHER
from os_ken.lib import hub

LOG = logging.getLogger("viplanes.controller.openflow.server")


class WriterConnection(Protocol):
    """What the writer uses of its connection (os-ken's ``Datapath`` as ``GuardedDatapath``
    extends it): its send queue and semaphore, socket, dispatcher state, and close calls."""

    send_q: Any  # None once the connection closes
    _send_q_sem: Any
    socket: Any
    state: Any
    address: Any
    id: Any

    def set_xid(self, msg: Any) -> int: ...

    def send(self, buf: bytes, close_socket: bool = False) -> bool: ...

    def shutdown(self) -> None: ...

    def _close_write(self) -> None: ...


class BatchWriter:
    """``send_msgs``/``serialize_batch``/``write_batch`` and the send loop they share a lock with."""

    def __init__(self, conn: WriterConnection, stopping: threading.Event) -> None:
        self.conn = conn
        self.stopping = stopping  # set when the connection is closing: no direct write then
        self.lock = threading.Lock()  # one writer on the socket at a time

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
            msg.datapath = self.conn
            if msg.xid is None:
                self.conn.set_xid(msg)
            msg.serialize()
            chunks.append(msg.buf)
        return b"".join(chunks)

    def write_batch(self, data: bytes) -> bool:
        """Write ``data`` on the calling thread when nothing is queued or being written (then
        nothing can be overtaken): the switch starts on it at once, without a hand-off to the
        send thread. Otherwise it queues behind what is there, as ``send`` does. False when the
        connection is closing."""
        conn = self.conn
        queue = conn.send_q
        if queue is not None and self.lock.acquire(blocking=False):
            try:
                # unfinished_tasks: buffers queued and not yet written (the send loop marks each
                # done after writing it, under the same lock)
                if queue.unfinished_tasks == 0 and conn.send_q is queue and not self.stopping.is_set():
                    try:
                        conn.socket.sendall(data)
                        return True
                    except OSError:  # timed out or broken mid-batch: the stream is unusable
                        LOG.warning(
                            "closing OpenFlow connection from %s (dpid=%s): write failed", conn.address, conn.id
                        )
                        conn.shutdown()
                        return False
            finally:
                self.lock.release()
        return bool(conn.send(data))

    def send_loop(self) -> None:
        """os-ken's send loop, each buffer written under ``lock`` and then marked done."""
        conn = self.conn
        queue = conn.send_q
        try:
            while conn.state != DEAD_DISPATCHER and queue is not None:
                buf, close_socket = queue.get()
                conn._send_q_sem.release()
                try:
                    with self.lock:
                        conn.socket.sendall(buf)
                finally:
                    queue.task_done()
                if close_socket:
                    break
        except OSError as exc:  # socket.timeout included
            LOG.debug("send to switch at %s failed: %s", conn.address, exc)
        finally:
            conn.send_q = None  # no new references; then release every waiting sender
            try:
                while queue is not None and queue.get(block=False):
                    conn._send_q_sem.release()
            except hub.QueueEmpty:
                pass
            conn._close_write()
