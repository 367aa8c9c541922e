#!/usr/bin/env bash
# Idempotent machine set-up for VIP Lanes: apt packages, venv, the package, rclone, goflow2, OVS daemons.
# Every step checks before it acts, so a second run costs seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export DEBIAN_FRONTEND=noninteractive

APT_PKGS=(openvswitch-switch mininet iperf3 dnsmasq-base iptables iputils-ping ethtool iproute2 procps psmisc
          python3-venv python3-pip postgresql postgresql-client golang-go git ca-certificates
          chromium chromium-driver faketime systemd maven podman runc debootstrap
          openssh-server rsync aria2 wget)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# golang-go from Debian is too old for rclone 1.68; any go >= 1.21 on PATH is enough.
if command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ]; then
  missing=("${missing[@]/golang-go}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -q >/dev/null || true
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/viplanes-apt.log 2>&1 \
    || { tail -20 /tmp/viplanes-apt.log; exit 1; }
fi

# The venv must see Debian's Mininet, which lives in /usr/lib/python3/dist-packages.
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
stamp=.venv/.installed-$(cat setup.py pyproject.toml | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip setuptools wheel
  .venv/bin/pip install -q -e '.[dev]'
  rm -f .venv/.installed-*; touch "$stamp"
fi

# rclone 1.68 (Debian's 1.60 has no `serve s3`), built once per machine into /var/cache (a clean
# clone's `make test` spent ~20 s linking it again) and linked as tools/bin/rclone.
RCLONE_VERSION=v1.68.2
RCLONE_DIR=/var/cache/viplanes/rclone-${RCLONE_VERSION}
if ! tools/bin/rclone version 2>/dev/null | grep -q "rclone ${RCLONE_VERSION}"; then
  if ! "$RCLONE_DIR/rclone" version 2>/dev/null | grep -q "rclone ${RCLONE_VERSION}"; then
    GO=$(command -v go || echo /usr/local/go/bin/go)
    echo "setup: building rclone ${RCLONE_VERSION} (a few minutes, once)"
    mkdir -p "$RCLONE_DIR"
    GOBIN="$RCLONE_DIR" GOFLAGS=-mod=mod "$GO" install "github.com/rclone/rclone@${RCLONE_VERSION}" \
      >/tmp/viplanes-rclone.log 2>&1 || { tail -20 /tmp/viplanes-rclone.log; exit 1; }
  fi
  mkdir -p tools/bin
  ln -sfn "$RCLONE_DIR/rclone" tools/bin/rclone
fi

# goflow2, the sFlow collector of automatic lanes (issue 32), from the Go module proxy, once into
# /var/cache (docs/automatic-lanes.md; viplanes/detection/sflow/goflow.py names the same version).
GOFLOW2_VERSION=v2.2.6
GOFLOW2_DIR=/var/cache/viplanes/goflow2-${GOFLOW2_VERSION}
if [ ! -x "$GOFLOW2_DIR/goflow2" ]; then
  GO=$(command -v go || echo /usr/local/go/bin/go)
  echo "setup: building goflow2 ${GOFLOW2_VERSION} (about 2 minutes, once)"
  mkdir -p "$GOFLOW2_DIR"
  GOBIN="$GOFLOW2_DIR" GOFLAGS=-mod=mod "$GO" install "github.com/netsampler/goflow2/v2/cmd/goflow2@${GOFLOW2_VERSION}" \
    >/tmp/viplanes-goflow2.log 2>&1 || { tail -20 /tmp/viplanes-goflow2.log; exit 1; }
fi

# Keycloak for the OpenID Connect tests (issue 30): from Maven Central, once, into /var/cache.
if [ ! -x /var/cache/viplanes/keycloak/keycloak-26.7.3/bin/kc.sh ]; then
  echo "setup: fetching Keycloak 26.7.3 (~170 MB, once)"
  .venv/bin/python -m tests.support.keycloak >/tmp/viplanes-keycloak.log 2>&1 \
    || { tail -20 /tmp/viplanes-keycloak.log; exit 1; }
fi

scripts/ovs-up
echo "setup: ok"
