"""Detection from the switches (issue 32): time from a flow's first packet to its Sighting, and
the collector's CPU per 1,000 samples.

A private Open vSwitch (tests/support/privovs.py, SflowBed) samples 1 in 64 packets with sFlow; goflow2
decodes them; the detector (threshold 50 Mbit/s) sights each of N sequential 2-second iperf3 flows
at 100 Mbit/s, once with the default 1 s window and once with 0.25 s. The clock starts just before
the iperf3 client starts (so it includes the client's start and its TCP handshake) and stops when
the sink is offered the flow's Sighting. CPU: 1-in-1 sampling of a 5 s flow at 40 Mbit/s (every
packet a sample), goflow2's and the reader thread's user+system time per 1,000 lines read, and
goflow2's idle CPU over the same time for reference.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench.harness.report import Result, Target
from bench.harness.stats import summarize_ms
from tests.support.privovs import SflowBed
from tests.support.sightsink import RecordingSink
from viplanes.detection.sflow import switchconfig
from viplanes.detection.sflow.detector import Detector, DetectorSettings, PrefixFilter
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED, CollectorProcess, CollectorSettings
from viplanes.detection.sflow.switchconfig import SwitchSampling

SAMPLING = 64
THRESHOLD = 50e6
FLOW_RATE = "100M"
PORT = 5201


def _cpu_s(stat: Path) -> float:
    """utime + stime of a process or thread, in seconds."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _iperf(bed: SflowBed, seconds: int, rate: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", bed.host_ns("a"), "iperf3", "-c", bed.ip("b"), "-p", str(PORT)]
        + ["-t", str(seconds), "-b", rate],
        check=True,
        capture_output=True,
        timeout=60,
    )


def _start(bed: SflowBed, window_s: float) -> tuple[RecordingSink, Detector, CollectorProcess]:
    sink = RecordingSink()
    settings = DetectorSettings(threshold_bps=THRESHOLD, window_s=window_s)
    detector = Detector(sink, PrefixFilter(["10.9.0.0/16"]), settings)
    collector = CollectorProcess(detector, time.monotonic, CollectorSettings(wrap=("ip", "netns", "exec", bed.ns)))
    collector.start()
    time.sleep(0.3)
    return sink, detector, collector


def _delays(bed: SflowBed, window_s: float, flows: int) -> tuple[list[float], int]:
    """Seconds from each flow's start to its first sighting; flows never sighted."""
    sink, _detector, collector = _start(bed, window_s)
    delays: list[float] = []
    missed = 0
    try:
        for _ in range(flows):
            t0 = time.monotonic()
            _iperf(bed, 2, FLOW_RATE)
            time.sleep(1.2)  # the switch flushes its last datagram within a second
            mine = [s for s in sink.sightings if s.dst_port == PORT and s.observed_at > t0]
            if mine:
                delays.append(mine[0].observed_at - t0)
            else:
                missed += 1
    finally:
        collector.stop()
    return delays, missed


def _cpu(bed: SflowBed, result: Result) -> None:
    switchconfig.enable(["br0"], SwitchSampling(sampling=1, agent="lo"), bed.vsctl_argv())
    _sink, _detector, collector = _start(bed, 1.0)
    try:
        pid, tid = collector.pid(), collector.reader_tid()
        assert pid is not None and tid is not None
        goflow_stat, reader_stat = Path(f"/proc/{pid}/stat"), Path(f"/proc/self/task/{tid}/stat")
        idle0 = _cpu_s(goflow_stat)
        time.sleep(5)
        idle = _cpu_s(goflow_stat) - idle0
        cpu0, rcpu0, lines0 = _cpu_s(goflow_stat), _cpu_s(reader_stat), collector.lines
        _iperf(bed, 5, "40M")
        time.sleep(1.5)
        cpu, rcpu = _cpu_s(goflow_stat) - cpu0, _cpu_s(reader_stat) - rcpu0
        lines = collector.lines - lines0
    finally:
        collector.stop()
    per_k = 1000 / lines if lines else 0.0
    result.add("goflow2 CPU per 1,000 samples", cpu * 1000 * per_k, "ms")
    result.add("reader+detector CPU per 1,000 samples", rcpu * 1000 * per_k, "ms")
    result.details.update(
        {"cpu_samples": lines, "goflow2_cpu_s": round(cpu, 3), "reader_cpu_s": round(rcpu, 3)}
        | {"goflow2_idle_cpu_s_per_5s": round(idle, 3), "cpu_flow": "5 s at 40 Mbit/s, 1-in-1 sampling"}
    )


def run(quick: bool = False, **_options: object) -> Result:
    result = Result("sflow")
    if not GOFLOW2_CACHED.exists():
        result.error = f"{GOFLOW2_CACHED} missing (make setup builds it)"
        return result
    flows = 5 if quick else 24
    bed = SflowBed().start()
    server = None
    try:
        switchconfig.enable(["br0"], SwitchSampling(sampling=SAMPLING, agent="lo"), bed.vsctl_argv())
        server = subprocess.Popen(
            ["ip", "netns", "exec", bed.host_ns("b"), "iperf3", "-s", "-p", str(PORT)], stdout=subprocess.DEVNULL
        )
        time.sleep(0.5)
        for window_s, label in ((1.0, ""), (0.25, ", 0.25 s window")):
            delays, missed = _delays(bed, window_s, flows)
            summary = summarize_ms(delays) if delays else None
            for q in ("p50", "p99"):
                value = summary.as_dict()[f"{q}_ms"] if summary else None
                result.add(f"first packet -> sighting {q}{label}", value, "ms", Target("<=", 3000))
            result.add(f"flows never sighted{label}", missed, "flows", Target("<=", 0))
            result.details[f"window_{window_s}"] = {
                "delays_ms": [round(d * 1000, 1) for d in delays],
                "summary": summary.as_dict() if summary else None,
            }
        result.details.update(
            {"flows": flows, "sampling": SAMPLING, "threshold_mbps": THRESHOLD / 1e6, "flow_rate": FLOW_RATE}
        )
        _cpu(bed, result)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        bed.stop()
    return result


if __name__ == "__main__":
    from bench.harness.report import print_table

    print_table([run()])
