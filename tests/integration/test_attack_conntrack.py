"""A lane-pool address handed from one host to another, on the real lab (Mininet + userspace
OVS conntrack + `viplanes serve`): a connection the desktop opened on its first lane must never
leave under the address that lane had once the address belongs to another host's lane.

    desktop (10.1.0.10) -s1- s2 ==bypass== s3 - edge - s4 - cloud:5201
    server  (10.1.0.20) -s1'        (s3: conntrack + NAT to the lane pool 198.51.100.192/27)

1. desktop lane (address A); the desktop connects from port 40100 and sends "ph1";
2. that lane is released; the server's lane gets A (lowest free), a new desktop lane gets B;
3. the desktop sends "ph2" on its old connection: it must leave as B. With one conntrack zone
   for every lane the old entry (NAT to A) won, and it left as A, the server's address.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import support
from tests.support.labcampus import CLOUD, Campus, lab_campus
from tests.support.procs import wait_for

pytestmark = pytest.mark.integration
TOOL = str(Path(support.__file__).with_name("attack_tool.py"))
DESKTOP_IP, SERVER_IP, OLD_PORT = "10.1.0.10", "10.1.0.20", 40100

_SERVER = (
    "import socket,time;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
    "s.bind(('0.0.0.0',5201));s.listen();s.settimeout(20);c,a=s.accept();print(a[0],flush=True);"
    "c.settimeout(30)\ntry:\n while c.recv(4096): pass\nexcept OSError: pass"
)
# sends "ph1", then waits for a line on stdin and sends "ph2" three times (it may be reset by then)
_CLIENT = (
    f"import socket,sys,time;s=socket.socket();s.bind(('{DESKTOP_IP}',{OLD_PORT}));"
    f"s.connect(('{CLOUD}',5201));s.sendall(b'VLATKph1_');print('sent',flush=True);"
    "sys.stdin.readline()\nfor _ in range(3):\n try: s.sendall(b'VLATKph2_')\n"
    " except OSError: break\n time.sleep(0.2)\nprint('done',flush=True)"
)


@pytest.fixture(scope="module")
def ct_campus(tmp_path_factory: pytest.TempPathFactory):
    with lab_campus(
        tmp_path_factory.mktemp("ctreuse"),
        "erin",
        {
            "src_prefixes": ["10.1.0.0/24"],
            "dst_prefixes": ["203.0.113.0/24"],
            "protocols": ["tcp"],
            "ports": ["5201"],
            "max_duration_s": 3600,
            "max_lanes": 5,
        },
    ) as (lab, serve, token):
        yield Campus(lab, serve, token)


def lane(campus: Campus, src: str) -> dict:
    r = campus.api(
        "POST",
        "/lanes",
        json={
            "src_ip": src,
            "dst_ip": CLOUD,
            "protocol": "tcp",
            "dst_port": 5201,
            "duration_s": 600,
            "purpose": "conntrack reuse test",
        },
    )
    assert r.status_code == 201 and r.json()["state"] == "active", r.text
    return r.json()


def test_an_old_connection_never_leaves_under_another_hosts_lane_address(ct_campus: Campus) -> None:
    cloud, desktop = ct_campus.lab.host("cloud"), ct_campus.lab.host("desktop")
    first = lane(ct_campus, DESKTOP_IP)
    server = cloud.popen(["python3", "-c", _SERVER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = watch = None
    try:
        assert wait_for(lambda: ":5201 " in cloud.cmd("ss -ltn"), 30), "the cloud's listener never started"
        watch = cloud.popen(  # counts until its stdin closes: a fixed 15 s could end before "ph2"
            ["python3", TOOL, "sniff", "cloud-eth0", "120", "until-eof"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert watch.stdout is not None and watch.stdout.readline().strip() == "ready"
        client = desktop.popen(
            ["python3", "-c", _CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert client.stdout is not None and client.stdout.readline().strip() == "sent"
        assert server.stdout is not None and server.stdout.readline().strip() == first["nat_ip"]

        r = ct_campus.api("POST", f"/lanes/{first['id']}/release")
        assert r.status_code == 200 and r.json()["state"] == "released", r.text
        taken = lane(ct_campus, SERVER_IP)
        assert taken["nat_ip"] == first["nat_ip"], "the pool no longer hands out the lowest free address"
        again = lane(ct_campus, DESKTOP_IP)
        assert again["nat_ip"] != first["nat_ip"]

        assert client.stdin is not None
        client.stdin.write("go\n")
        client.stdin.flush()
        assert client.stdout.readline().strip() == "done"
        out, err = watch.communicate(timeout=150)
        assert watch.returncode == 0, err
        seen = json.loads(out)
    finally:
        for proc in (client, server, watch):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(5)
        for ln in ct_campus.api("GET", "/lanes").json():
            if ln["state"] == "active":
                ct_campus.api("POST", f"/lanes/{ln['id']}/release")
    print(f"\ncloud saw: {seen}; first lane {first['nat_ip']}, the desktop's new lane {again['nat_ip']}")
    assert seen["ph1"][1] == first["nat_ip"], seen
    assert "ph2" in seen, seen  # the old connection's next segment reached the cloud ...
    assert seen["ph2"][1] == again["nat_ip"], seen  # ... under the desktop's own new address
