#!/usr/bin/env bash
# Debian/Ubuntu packages the tests run for real: Docker Engine, Prometheus + promtool,
# Alertmanager + amtool, mtail (the exporter benchmark's peer), debootstrap (local base image),
# Chromium (headless: the demo's web pages load and render, tests/ansible/test_monitoring_ui.py);
# gcc and the Python headers build the exporter's chunk scanner (a C extension) at install.
# Versions are the distribution's, like every package here.
set -euo pipefail
packages=(docker.io prometheus prometheus-alertmanager mtail debootstrap git ca-certificates rsync
  gcc libc6-dev python3-dev chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# Debian starts no services in containers; the tests start what they need themselves.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
