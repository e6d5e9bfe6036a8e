#!/usr/bin/env bash
# Start a Docker engine if none answers. Tests use host networking on loopback only, so the
# engine runs without a bridge or iptables rules: no test traffic can reach a private range.
set -euo pipefail
if docker info >/dev/null 2>&1; then
  exit 0
fi
command -v dockerd >/dev/null || { echo "dockerd not found: install docker.io first" >&2; exit 1; }
mkdir -p /var/log
nohup dockerd --bridge=none --iptables=false --ip6tables=false >/var/log/specserve-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "dockerd did not come up in 60 s; see /var/log/specserve-dockerd.log" >&2
tail -20 /var/log/specserve-dockerd.log >&2
exit 1
