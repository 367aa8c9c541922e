"""The cabling probe's frame (``probeframe.py``): only this controller process can make one, and
each is good once, within its window (issue 42: a campus host cannot forge a link)."""

from __future__ import annotations

from viplanes.controller.runtime.probeframe import FRAME_LEN, MAC_LEN, Probe, ProbeCodec, Refusal

NOW = 1000.0


def _codec(secret: bytes = b"k" * 32) -> ProbeCodec:
    return ProbeCodec(window_s=5.0, secret=secret)


def test_a_probe_comes_back_as_the_switch_and_port_it_left() -> None:
    codec = _codec()
    frame = codec.build(3, 7, NOW)
    assert len(frame) == FRAME_LEN and frame[:6] == bytes.fromhex("0180c200000e")
    got = codec.check(frame + b"\0" * 4, NOW + 0.2)  # padding ignored
    assert isinstance(got, Probe) and (got.dpid, got.port) == (3, 7) and abs(got.age_s - 0.2) < 0.002


def test_a_forged_or_altered_probe_is_refused() -> None:
    codec = _codec()
    frame = bytearray(codec.build(3, 7, NOW))
    forged = _codec(secret=b"x" * 32).build(3, 7, NOW)  # another secret: a host's guess, or another process's
    got = codec.check(forged, NOW)
    assert isinstance(got, Refusal) and got.code == "bad_mac", got
    moved = bytearray(frame)
    moved[14 + 4 + 1 + 8 + 3] ^= 0x01  # port 7 -> 6 with the MAC of port 7
    got = codec.check(bytes(moved), NOW)
    assert isinstance(got, Refusal) and got.code == "bad_mac", got
    frame[-MAC_LEN] ^= 0xFF
    got = codec.check(bytes(frame), NOW)
    assert isinstance(got, Refusal) and got.code == "bad_mac", got


def test_a_replayed_or_old_probe_is_refused() -> None:
    codec = _codec()
    frame = codec.build(3, 7, NOW)
    assert isinstance(codec.check(frame, NOW + 0.1), Probe)
    got = codec.check(frame, NOW + 0.2)
    assert isinstance(got, Refusal) and got.code == "replayed", got
    old = codec.build(3, 8, NOW)
    got = codec.check(old, NOW + 5.5)  # recorded and played back after the window
    assert isinstance(got, Refusal) and got.code == "stale", got


def test_frames_that_are_no_probe_are_refused_without_parsing_further() -> None:
    codec = _codec()
    frame = codec.build(3, 7, NOW)
    assert codec.check(frame[:40], NOW) == Refusal("short", f"40 bytes, a probe has {FRAME_LEN}")
    other = frame[:12] + b"\x88\xcc" + frame[14:]  # LLDP's EtherType: a campus LLDP agent's frame
    got = codec.check(other, NOW)
    assert isinstance(got, Refusal) and got.code == "not_a_probe", got
