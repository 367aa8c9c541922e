"""The pure parts of the WAN model's proxy: the delay line (a round trip) and the request framer.

`DelayLine` stands for the long path beyond the edge: bytes read at ``t`` leave at
``t + rtt/2`` (one way), and count against the connection's window until ``t + rtt`` (when
their acknowledgement would be back), so one connection moves at most ``window / rtt``. A
request-response loop pays the whole round trip: half on the request, half on the response.

`RequestFramer` finds where each HTTP/1.1 request starts in a client's byte stream, so the
storage model can make every request wait for a storage worker (seed 001: requests cost the
storage a service time, and concurrent users share its workers). It reads Content-Length to
skip bodies; a chunked body, an unparsable head or a head over 64 KB turns it into a plain pipe
for the rest of the connection (counted as one request, never an error).

No clocks, no sockets: times are passed in, so the unit tests drive them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

MAX_HEAD = 64 * 1024


@dataclass
class DelayLine:
    """One direction of one connection: a one-way delay and a window of bytes in flight."""

    rtt_s: float
    window_bytes: float
    _inflight: deque[tuple[float, int]] = field(default_factory=deque)  # (credit back at, bytes)
    _used: int = 0

    @property
    def one_way_s(self) -> float:
        return self.rtt_s / 2

    def _release(self, now: float) -> None:
        while self._inflight and self._inflight[0][0] <= now:
            self._used -= self._inflight.popleft()[1]

    def room(self, now: float) -> float:
        """Bytes that may still be read now without exceeding the window."""
        self._release(now)
        return self.window_bytes - self._used

    def wait_for_room(self, now: float) -> float:
        """Seconds until some window comes back (0 if there is room now)."""
        if self.room(now) > 0 or not self._inflight:
            return 0.0
        return max(0.0, self._inflight[0][0] - now)

    def push(self, nbytes: int, now: float) -> float:
        """Take ``nbytes`` read at ``now`` into flight; the time they may leave."""
        self._inflight.append((now + self.rtt_s, nbytes))
        self._used += nbytes
        return now + self.one_way_s


@dataclass
class RequestFramer:
    """Splits a client's stream into pieces; a piece that begins a request is flagged."""

    _state: str = "head"  # head | body | raw
    _buf: bytes = b""
    _body_left: int = 0

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """The pieces of ``data`` to forward, each with whether it starts a new request."""
        out: list[tuple[bytes, bool]] = []
        while data:
            if self._state == "raw":
                out.append((data, False))
                break
            if self._state == "body":
                take = data[: self._body_left]
                data = data[len(take) :]
                self._body_left -= len(take)
                out.append((take, False))
                if self._body_left == 0:
                    self._state = "head"
                continue
            self._buf += data
            data = b""
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD:
                    out.append((self._flush(), True))
                    self._state = "raw"
                break
            head, data = self._buf[: end + 4], self._buf[end + 4 :]
            self._buf = b""
            out.append((head, True))
            length = _body_length(head)
            if length is None:
                self._state = "raw"
            elif length > 0:
                self._state, self._body_left = "body", length
        return out

    def _flush(self) -> bytes:
        buf, self._buf = self._buf, b""
        return buf


READS = (b"GET ", b"HEAD ")


def is_read(head: bytes) -> bool:
    """Whether a request head is a read (GET, HEAD), which the storage serves from its cache or
    first replica; anything else (PUT, POST, DELETE, a head the framer could not follow) is
    charged as a write."""
    return head.startswith(READS)


def _body_length(head: bytes) -> int | None:
    """The body's length from a request head; None when the framer cannot follow it."""
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = name.strip().lower()
        if name == b"transfer-encoding" and value.strip().lower() != b"identity":
            return None
        if name == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return None
            if length < 0:
                return None
    return length
