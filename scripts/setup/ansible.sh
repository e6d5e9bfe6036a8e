#!/usr/bin/env bash
# What the Ansible tests and the no-GPU demo need beyond the venv:
#  - local Prometheus and Alertmanager images where prom/prometheus and prom/alertmanager
#    cannot be pulled (CI): Debian's packaged binaries, laid out like the upstream images
#    (/bin/prometheus, /bin/promtool, /bin/alertmanager, /bin/amtool; user nobody), FROM the
#    local base image. Tags carry Debian's upstream version; the inventory names them
#    (monitoring_prometheus_image / monitoring_alertmanager_image).
#  - the stand-in, exporter and router images (scripts/build-images.sh --local-base; the router
#    from its pinned PyPI wheel, for the fleet: docs/router.md).
# Idempotent: an image that exists is not rebuilt.
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${SPECSERVE_LOCAL_BASE:-specserve-local/bookworm-python:3.11}

version_of() {  # "prometheus, version 2.42.0+ds (...)" -> 2.42.0
  "$1" --version 2>&1 | head -1 | sed -E 's/.*version ([0-9]+\.[0-9]+\.[0-9]+).*/\1/'
}

build() {  # build NAME TAG ENTRYPOINT BINARY:DEST...
  local name=$1 tag=$2 entry=$3; shift 3
  local ref="specserve-local/$name:$tag"
  if docker image inspect "$ref" >/dev/null 2>&1; then
    echo "$ref present"
    return
  fi
  local ctx
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  local copies=""
  for pair in "$@"; do
    cp "${pair%%:*}" "$ctx/$(basename "${pair#*:}")"
    copies+="COPY $(basename "${pair#*:}") ${pair#*:}"$'\n'
  done
  cat >"$ctx/Dockerfile" <<DOCKERFILE
ARG BASE_IMAGE
FROM \${BASE_IMAGE}
$copies
USER 65534:65534
ENTRYPOINT ["$entry"]
DOCKERFILE
  docker build --quiet --network none --build-arg "BASE_IMAGE=$BASE" -t "$ref" "$ctx" >/dev/null
  echo "built $ref"
}

for bin in prometheus promtool prometheus-alertmanager amtool; do
  command -v "$bin" >/dev/null || { echo "$bin missing: apt-get install prometheus prometheus-alertmanager" >&2; exit 1; }
done
build prometheus "$(version_of prometheus)" /bin/prometheus \
  "$(command -v prometheus):/bin/prometheus" "$(command -v promtool):/bin/promtool"
# Debian's Alertmanager reads its notification templates from disk instead of embedding them.
build alertmanager "$(version_of prometheus-alertmanager)" /bin/alertmanager \
  "$(command -v prometheus-alertmanager):/bin/alertmanager" "$(command -v amtool):/bin/amtool" \
  /usr/share/prometheus/alertmanager/default.tmpl:/usr/share/prometheus/alertmanager/default.tmpl \
  /usr/share/prometheus/alertmanager/email.tmpl:/usr/share/prometheus/alertmanager/email.tmpl
bash scripts/build-images.sh --local-base --images exporter,standin,router
