"""Traffic for the link-failover lab test, run inside lab hosts: a UDP probe with an echo (so
the border's conntrack sees replies) that records the longest gap, and a paced TCP upload
checked by SHA-256. Every wait has a deadline.

    python -m tests.support.linkprobe udp-sink PORT OUT MAX_SECONDS
    python -m tests.support.linkprobe udp-send HOST PORT RATE SECONDS
    python -m tests.support.linkprobe tcp-sink PORT OUT SECONDS
    python -m tests.support.linkprobe tcp-send HOST PORT BYTES BYTES_PER_S
"""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import time


def _payload(n: int) -> bytes:
    block = hashlib.sha256(b"viplanes-link-failover").digest() * 2048  # 64 KiB, deterministic
    return (block * (n // len(block) + 1))[:n]


IDLE_END_S = 2.0  # the sink ends this long after the last datagram (the sender is done)
SO_RCVBUFFORCE = 33  # Linux socket(7), root only: past net.core.rmem_max (not in Python's socket)


def udp_sink(port: int, out: str, seconds: float) -> None:
    """Echo and record datagrams for ``seconds`` at most, ending ``IDLE_END_S`` after the last:
    a window fixed from the sink's own start could end before a sender that started late (a
    loaded machine) sent its last, which then looked lost."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # 8 MiB of queue (root: past rmem_max): the default ~0.3 s of datagrams overflowed when the
    # sink was not scheduled for longer, and those it dropped itself looked like the network's loss
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    arrivals: list[float] = []
    seqs: set[int] = set()
    deadline = time.monotonic() + seconds
    while (now := time.monotonic()) < deadline and not (arrivals and now - arrivals[-1] > IDLE_END_S):
        try:
            data, peer = sock.recvfrom(2048)
        except TimeoutError:
            continue
        arrivals.append(time.monotonic())
        seqs.add(int.from_bytes(data[:8], "big"))
        sock.sendto(data[:8], peer)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    worst = max(range(len(gaps)), key=gaps.__getitem__, default=None)
    with open(out, "w") as f:
        json.dump(
            {
                "received": len(arrivals),
                "longest_gap_s": gaps[worst] if worst is not None else None,
                "gap_at_s": arrivals[worst] - arrivals[0] if worst is not None else None,
                "longest_loss_run": _longest_run_missing(seqs),
                "last_seq": max(seqs, default=-1),
            },
            f,
        )


def _longest_run_missing(seqs: set[int]) -> int:
    """The most consecutive datagrams lost: at a fixed send rate, how long the network dropped
    them by the sender's schedule (an arrival gap also counts a sender or receiver that was not
    scheduled for a while, then caught up)."""
    run = best = 0
    for seq in range(min(seqs, default=0), max(seqs, default=-1) + 1):
        run = 0 if seq in seqs else run + 1
        best = max(best, run)
    return best


def udp_send(host: str, port: int, rate: float, seconds: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    start = time.monotonic()
    seq = 0
    while (now := time.monotonic()) - start < seconds:
        due = start + seq / rate
        if now < due:
            time.sleep(min(due - now, 0.001))
            continue
        sock.sendto(seq.to_bytes(8, "big") + b"x" * 56, (host, port))
        seq += 1
        try:
            while sock.recv(64):
                pass
        except BlockingIOError:
            pass
    print(seq)


def tcp_sink(port: int, out: str, seconds: float) -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(seconds)
    conn, _ = srv.accept()
    conn.settimeout(seconds)
    digest, total = hashlib.sha256(), 0
    while chunk := conn.recv(65536):
        digest.update(chunk)
        total += len(chunk)
    with open(out, "w") as f:
        json.dump({"bytes": total, "sha256": digest.hexdigest(), "done_at": time.time()}, f)


def tcp_send(host: str, port: int, size: int, per_s: float) -> None:
    data = _payload(size)
    sock = socket.create_connection((host, port), timeout=60)
    start, sent, step = time.monotonic(), 0, 16384
    while sent < size:
        due = start + sent / per_s
        if time.monotonic() < due:
            time.sleep(due - time.monotonic())
        sock.sendall(data[sent : sent + step])
        sent += step
    sock.shutdown(socket.SHUT_WR)
    sock.recv(1)
    sock.close()
    print(json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "done_at": time.time()}))


def main(argv: list[str]) -> None:
    cmd, args = argv[0], argv[1:]
    if cmd == "udp-sink":
        udp_sink(int(args[0]), args[1], float(args[2]))
    elif cmd == "udp-send":
        udp_send(args[0], int(args[1]), float(args[2]), float(args[3]))
    elif cmd == "tcp-sink":
        tcp_sink(int(args[0]), args[1], float(args[2]))
    elif cmd == "tcp-send":
        tcp_send(args[0], int(args[1]), int(args[2]), float(args[3]))
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
