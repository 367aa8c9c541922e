"""Switch authentication, pure parts: the PKI round trip, the dpid authorization decision, the
takeover rule, the token bucket and the per-source handshake cap; plus one TLS round trip of our
listener's channel against Python's ssl client (loopback, no OVS)."""

from __future__ import annotations

import os
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509

from tests.support.paths import REPO
from viplanes import pki
from viplanes.cli.main import main
from viplanes.controller.openflow.admission import Admission
from viplanes.controller.openflow.peerauth import SwitchTrust, TokenBucket, authorize, normalize_pins
from viplanes.controller.openflow.tls import ContextSource, TLSChannel, TLSFiles
from viplanes.topologies.loader import TopologyError, parse_topology


def der(path: Path) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return pki.load_cert(path).public_bytes(Encoding.DER)


def topology(pins: dict[str, list[str]] | None = None):
    data = yaml.safe_load((REPO / "topologies" / "campus.yaml").read_text())
    for switch in data["switches"]:
        if switch["name"] in (pins or {}):
            switch["cert_sha256"] = pins[switch["name"]]
    return parse_topology(data, "campus.yaml")


# ---- PKI ---------------------------------------------------------------------------------------
def test_pki_round_trip_signs_names_dpids_and_keeps_keys_private(campus_pki):
    ca = pki.load_cert(campus_pki / "ca.crt")
    cert = pki.load_cert(campus_pki / "switch-host1.crt")
    ca.public_key().verify(
        cert.signature,
        cert.tbs_certificate_bytes,
        __import__("cryptography.hazmat.primitives.asymmetric.ec", fromlist=["ECDSA"]).ECDSA(
            cert.signature_hash_algorithm
        ),
    )
    assert cert.issuer == ca.subject
    assert pki.cert_dpids(cert) == {1, 2}
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "urn:viplanes:dpid:0000000000000001" in san.get_values_for_type(x509.UniformResourceIdentifier)
    for key in campus_pki.glob("*.key"):
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600, key
    assert pki.cert_sha256((campus_pki / "switch-host1.crt").read_bytes()) == pki.cert_sha256(
        der(campus_pki / "switch-host1.crt")
    )
    with pytest.raises(pki.PKIError, match="already holds a CA"):
        pki.init(campus_pki)


def test_pki_cli_init_switch_rotate(tmp_path):
    runner = CliRunner()
    d = tmp_path / "p"
    r = runner.invoke(main, ["pki", "init", "--dir", str(d)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["pki", "switch", "--dir", str(d), "--name", "sw1", "--dpid", "1", "--dpid", "0x1f"])
    assert r.exit_code == 0, r.output
    pin = pki.cert_sha256(pki.load_cert(d / "switch-sw1.crt"))
    assert f"sha256 pin: {pin}" in r.output
    assert f"ovs-vsctl set-ssl {d.resolve()}/switch-sw1.key" in r.output
    assert "set-controller BRIDGE ssl:" in r.output
    # the next steps an operator copies: each bridge's dpid and the fail mode (docs/switches.md)
    assert "ovs-vsctl set-fail-mode BRIDGE secure" in r.output
    assert "other-config:datapath-id=0000000000000001" in r.output
    assert "other-config:datapath-id=000000000000001f" in r.output
    assert pki.cert_dpids(pki.load_cert(d / "switch-sw1.crt")) == {1, 0x1F}
    r = runner.invoke(main, ["pki", "rotate", "switch", "--dir", str(d), "--name", "sw1", "--dpid", "1"])
    assert r.exit_code == 0 and f"[{pin}, " in r.output
    r = runner.invoke(main, ["pki", "switch", "--dir", str(d), "--name", "sw1", "--dpid", "zz"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    r = runner.invoke(main, ["pki", "switch", "--dir", str(tmp_path / "none"), "--name", "x", "--dpid", "1"])
    assert r.exit_code == 1 and "viplanes pki init" in r.output


def test_serve_without_pki_or_insecure_flag_says_how_to_fix(tmp_path):
    r = CliRunner().invoke(main, ["serve", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert r.exit_code == 1
    assert "--pki DIR" in r.output and "--insecure-tcp" in r.output and "Traceback" not in r.output


# ---- authorization -----------------------------------------------------------------------------
def test_dpid_named_in_the_certificate_is_authorized_only_for_those_dpids(campus_pki):
    trust = SwitchTrust(topology())
    host1 = der(campus_pki / "switch-host1.crt")
    assert authorize(host1, 1, trust).ok and authorize(host1, 2, trust).ok
    refused = authorize(host1, 3, trust)
    assert not refused.ok and "not authorized for dpid 3" in refused.reason


def test_unknown_dpid_is_refused_with_a_topology_and_allowed_without(campus_pki):
    cert = der(campus_pki / "switch-host3.crt")
    decision = authorize(cert, 0x77, SwitchTrust(topology()))
    assert not decision.ok and "not in topology campus" in decision.reason
    assert not authorize(None, 0x77, SwitchTrust(topology())).ok  # also on --insecure-tcp
    assert authorize(cert, 3, SwitchTrust(None)).ok
    assert not authorize(cert, 0x77, SwitchTrust(None)).ok  # no topology: the SAN still counts


def test_topology_pin_overrides_the_san_and_a_rotation_lists_two(campus_pki):
    host1 = der(campus_pki / "switch-host1.crt")
    host3 = der(campus_pki / "switch-host3.crt")
    p1, p3 = pki.cert_sha256(host1), pki.cert_sha256(host3)
    trust = SwitchTrust(topology({"s1": [p3], "s2": [p1, p3]}))
    assert not authorize(host1, 1, trust).ok  # names dpid 1, but s1 pins another certificate
    assert authorize(host3, 1, trust).ok  # pinned, although it names only dpid 3
    assert authorize(host1, 2, trust).ok and authorize(host3, 2, trust).ok


def test_fleet_pin_serves_every_unpinned_switch(campus_pki):
    host3 = der(campus_pki / "switch-host3.crt")
    trust = SwitchTrust(topology({"s1": ["ab" * 32]}), normalize_pins([pki.cert_sha256(host3)]))
    assert authorize(host3, 2, trust).ok and authorize(host3, 4, trust).ok
    assert not authorize(host3, 1, trust).ok  # s1 has its own pin


def test_bad_pins_are_refused_on_load_and_on_the_command_line():
    with pytest.raises(TopologyError, match="cert_sha256"):
        topology({"s1": ["nothex"]})
    with pytest.raises(ValueError):
        normalize_pins(["12:34"])
    assert normalize_pins(["AB:" * 31 + "AB"]) == {"ab" * 32}


# ---- takeover ----------------------------------------------------------------------------------
class Conn:
    def __init__(self, name: str, cert: bytes | None, answers: bool = True) -> None:
        self.address, self.cert, self.answers = name, cert, answers
        self.closed = False
        self.probes = 0

    def peer_cert_der(self) -> bytes | None:
        return self.cert

    def probe(self, timeout_s: float) -> bool:
        self.probes += 1
        return self.answers and not self.closed

    def shutdown(self) -> None:
        self.closed = True


def test_newcomer_never_takes_a_dpid_whose_connection_answers(campus_pki):
    gate = Admission(SwitchTrust(topology()))
    cert = der(campus_pki / "switch-host1.crt")
    real, impostor = Conn("real", cert), Conn("impostor", cert)
    assert gate.admit(real, 1)
    assert not gate.admit(impostor, 1)
    assert real.probes == 1 and not real.closed and gate.live[1] is real
    gate.release(impostor, 1)  # the refused one closing changes nothing
    assert gate.live[1] is real


def test_newcomer_replaces_a_dead_connection_and_release_frees_the_dpid(campus_pki):
    gate = Admission(SwitchTrust(topology()))
    cert = der(campus_pki / "switch-host1.crt")
    dead, back = Conn("old", cert, answers=False), Conn("new", cert)
    assert gate.admit(dead, 1)
    assert gate.admit(back, 1)
    assert dead.closed and gate.live[1] is back
    gate.release(dead, 1)
    assert gate.live[1] is back
    gate.release(back, 1)
    assert 1 not in gate.live


# ---- limits ------------------------------------------------------------------------------------
def test_token_bucket_allows_burst_then_rate_and_flags_a_long_flood():
    now = [0.0]
    bucket = TokenBucket(50, 100, clock=lambda: now[0], close_after=500)
    assert sum(bucket.take() for _ in range(150)) == 100
    now[0] += 1.0
    assert sum(bucket.take() for _ in range(100)) == 50
    assert bucket.dropped == 100 and not bucket.abusive
    for _ in range(500):
        bucket.take()
    assert bucket.abusive
    quiet = TokenBucket(50, 100, clock=lambda: now[0], close_after=500)
    for _ in range(60):  # 6 windows of 10 s, each a little over the limit: never abusive
        now[0] += 10.0
        for _ in range(600):
            quiet.take()
    assert not quiet.abusive


# ---- TLS channel -------------------------------------------------------------------------------
def _tls_pair(campus_pki: Path, client_cert: str | None):
    files = TLSFiles(campus_pki / "ca.crt", campus_pki / "controller.crt", campus_pki / "controller.key")
    server_side, client_side = socket.socketpair()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(campus_pki / "ca.crt"))
    if client_cert:
        ctx.load_cert_chain(str(campus_pki / f"{client_cert}.crt"), str(campus_pki / f"{client_cert}.key"))
    channel = TLSChannel(server_side, ContextSource(files).get())
    result: dict = {}

    def serve() -> None:
        try:
            channel.handshake(5.0)
            result["cert"] = channel.peer_cert_der()
            result["data"] = channel.recv(100)
            channel.sendall(b"pong")
        except (ssl.SSLError, OSError) as exc:
            result["error"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    return channel, ctx, client_side, thread, result


def test_tls_channel_requires_a_campus_client_certificate(campus_pki):
    channel, ctx, client_side, thread, result = _tls_pair(campus_pki, "switch-host1")
    with ctx.wrap_socket(client_side) as client:
        client.sendall(b"ping")
        assert client.recv(4) == b"pong"
    thread.join(5)
    assert result["data"] == b"ping"
    assert pki.cert_dpids(x509.load_der_x509_certificate(result["cert"])) == {1, 2}

    channel, ctx, client_side, thread, result = _tls_pair(campus_pki, None)
    try:
        with ctx.wrap_socket(client_side) as client:
            client.sendall(b"ping")
            client.recv(4)
    except (ssl.SSLError, OSError):
        pass
    thread.join(5)
    assert isinstance(result.get("error"), ssl.SSLError)


# ---- the connection's screen (before the guard and any parser) -----------------------------------
def test_connection_screen_admits_once_and_limits_packet_ins():
    import struct

    from os_ken.ofproto import ofproto_v1_3 as ofp

    from tests.support.fake_switches import arp_request_packet_in, message
    from viplanes.controller.openflow.admission import Limits
    from viplanes.controller.openflow.server import GuardedDatapath

    def features(dpid: int) -> bytes:
        return message(ofp.OFPT_FEATURES_REPLY, struct.pack("!QIBB2xII", dpid, 0, 254, 0, 0, 0))

    gate = Admission(SwitchTrust(topology()))  # plain TCP: only the topology's dpids count
    limits = Limits(packet_in_per_s=1, packet_in_burst=2, packet_in_close_after=5)
    punt = arp_request_packet_in("198.51.100.193")
    with socket.create_server(("127.0.0.1", 0)) as srv:
        peers = [socket.create_connection(srv.getsockname()) for _ in range(2)]
        ours = [srv.accept()[0] for _ in range(2)]
    try:
        stranger, switch = (GuardedDatapath(s, ("127.0.0.1", n), gate, limits) for n, s in enumerate(ours))
        assert not stranger._screen(punt) and not stranger._screen(message(ofp.OFPT_PORT_STATUS))
        assert stranger._screen(message(ofp.OFPT_ECHO_REQUEST))  # the handshake may go on
        assert not stranger._screen(features(0x77)) and stranger.rejected  # not in the topology
        assert switch.id is None and switch._screen(features(1)) and switch.authorized and gate.live[1] is switch
        assert switch.id == 1  # set by the reader, before any app thread handles the features reply
        assert not switch._screen(features(2))  # a second features reply cannot rename it
        assert [switch._screen(punt) for _ in range(3)] == [True, True, False]
        while switch.rejected is None:  # far over the limit: the connection is closed
            assert not switch._screen(punt)
        assert "PACKET_IN flood" in switch.rejected and switch.packet_in_bucket.dropped == 6
    finally:
        for s in (*peers, *ours):
            s.close()


def test_an_arp_flood_does_not_starve_the_cabling_probes_and_a_probe_flood_closes_nothing():
    """Issue 42: the ARP punt and the probes shared one PACKET_IN budget, so a host flooding ARP
    for lane-pool addresses took every token and the links went ``unverified``. Each now has
    its own; a host's own probe frames never reach either (dropped at its port, ``linkprobe``)."""
    import struct

    from os_ken.ofproto import ofproto_v1_3 as ofp

    from tests.support.fake_switches import arp_request_packet_in, message, packet_in
    from viplanes.controller.openflow.admission import Limits
    from viplanes.controller.openflow.punts import frame_ethertype, is_probe
    from viplanes.controller.openflow.server import GuardedDatapath
    from viplanes.controller.runtime.probeframe import ProbeCodec

    gate = Admission(SwitchTrust(topology()))
    limits = Limits(packet_in_per_s=1, packet_in_burst=2, packet_in_close_after=5, probe_in_per_s=1, probe_in_burst=2)
    arp = arp_request_packet_in("198.51.100.193")
    probe = packet_in(ProbeCodec(5.0, b"k" * 32).build(1, 3, 0.0), in_port=3)
    assert is_probe(probe) and not is_probe(arp) and frame_ethertype(arp) == 0x0806
    assert frame_ethertype(message(ofp.OFPT_PACKET_IN, b"\0" * 10)) is None  # cut short: no guess
    with socket.create_server(("127.0.0.1", 0)) as srv:
        peer = socket.create_connection(srv.getsockname())
        ours = srv.accept()[0]
    try:
        switch = GuardedDatapath(ours, ("127.0.0.1", 1), gate, limits)
        assert switch._screen(message(ofp.OFPT_FEATURES_REPLY, struct.pack("!QIBB2xII", 1, 0, 254, 0, 0, 0)))
        for _ in range(4):  # the ARP budget is spent and more
            switch._screen(arp)
        assert switch.packet_in_bucket.dropped == 2
        assert [switch._screen(probe) for _ in range(3)] == [True, True, False]  # the probes' own
        for _ in range(50):  # a flood of probe frames from a link port: dropped, never closes
            switch._screen(probe)
        assert switch.rejected is None and switch.packet_in_bucket.dropped == 2
    finally:
        peer.close()
        ours.close()
