#!/usr/bin/env bash
# What the Ansible tests and the no-GPU demo need beyond the venv:
#  - local Prometheus and Alertmanager images where prom/prometheus and prom/alertmanager
#    cannot be pulled (CI): Debian's packaged binaries, laid out like the upstream images
#    (/bin/prometheus, /bin/promtool, /bin/alertmanager, /bin/amtool; user nobody), FROM the
#    local base image, with their web UIs where those binaries look for them:
#      Prometheus   /usr/share/prometheus/web: Debian's classic UI (templates, static files and
#                   the Debian JavaScript libraries they link to). Debian builds no React UI, so
#                   the pages are /classic/alerts, /classic/rules, ... and / redirects there.
#      Alertmanager /usr/share/prometheus/alertmanager/ui: Debian ships it empty (no Elm compiler);
#                   the built UI comes from the same source package's -dev package
#                   (asset/assets_vfsdata.go, upstream's embedded copy; scripts/setup/alertmanager_ui.py).
#    Tags are Debian's upstream version and REVISION below; the inventory names them
#    (monitoring_prometheus_image / monitoring_alertmanager_image).
#  - the stand-in, exporter and router images (scripts/build-images.sh --local-base; the router
#    from its pinned PyPI wheel, for the fleet: docs/router.md), and the router release a fleet
#    upgrades from (router_previous, for the upgrade test).
# Idempotent: an image whose inputs are unchanged is not rebuilt. A tag is never rebuilt with
# other content (other runs may be using it): the script stops and says what to do.
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${SPECSERVE_LOCAL_BASE:-specserve-local/bookworm-python:3.11}
# Part of both tags. Bump it when what goes into these images changes, with the tags in
# playbooks/inventory/standin/hosts.yml and tests/ansible/conftest.py (ui1: the web UIs added).
REVISION=ui1
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

version_of() {  # "prometheus, version 2.42.0+ds (...)" -> 2.42.0
  "$1" --version 2>&1 | head -1 | sed -E 's/.*version ([0-9]+\.[0-9]+\.[0-9]+).*/\1/'
}

build() {  # build NAME TAG ENTRYPOINT CONTEXT: CONTEXT/root/ becomes the image's /
  local name=$1 tag=$2 entry=$3 ctx=$4
  local ref="specserve-local/$name:$tag"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
ARG BASE_IMAGE
FROM \${BASE_IMAGE}
COPY root/ /
USER 65534:65534
ENTRYPOINT ["$entry"]
DOCKERFILE
  # Every file's content and the base: the image's inputs, recorded as a label.
  local inputs have
  inputs=$({ (cd "$ctx" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    echo "base=$BASE"; } | sha256sum | cut -d' ' -f1)
  if docker image inspect "$ref" >/dev/null 2>&1; then
    have=$(docker image inspect --format '{{ index .Config.Labels "io.specserve.inputs" }}' "$ref")
    if [[ $have == "$inputs" ]]; then
      echo "$ref present"
      return
    fi
    echo "scripts/setup/ansible.sh: $ref exists but was built from other inputs (a Debian package" \
      "update, or a change here without a new REVISION). Bump REVISION in scripts/setup/ansible.sh" \
      "and the tags in playbooks/inventory/standin/hosts.yml and tests/ansible/conftest.py, or," \
      "when nothing uses $ref any more, remove it (docker rmi $ref) and run this again." >&2
    exit 1
  fi
  docker build --quiet --network none --build-arg "BASE_IMAGE=$BASE" \
    --label "io.specserve.inputs=$inputs" -t "$ref" "$ctx" >/dev/null
  echo "built $ref"
}

alertmanager_ui() {  # alertmanager_ui DEST: the built UI of the installed Alertmanager's source
  local dest=$1 pkg=golang-github-prometheus-alertmanager-dev source_version cache deb
  source_version=$(dpkg-query -W -f='${source:Version}' prometheus-alertmanager)
  cache=.cache/debian/$pkg-${source_version//:/_}
  mkdir -p "$cache"
  if ! compgen -G "$cache/*.deb" >/dev/null; then
    # Downloaded, not installed: installing it pulls in a Go toolchain's worth of -dev packages.
    if ! (cd "$cache" && apt-get download -q "$pkg=$source_version") >"$cache/download.log" 2>&1; then
      $SUDO apt-get update -qq
      (cd "$cache" && apt-get download -q "$pkg=$source_version") >"$cache/download.log" 2>&1 || {
        cat "$cache/download.log" >&2
        echo "scripts/setup/ansible.sh: apt-get download $pkg=$source_version failed: the" \
          "Alertmanager UI comes from Debian's source package of the installed binary; check the" \
          "apt sources (bookworm main) and the network" >&2
        exit 1
      }
    fi
  fi
  deb=$(compgen -G "$cache/*.deb" | head -1)
  dpkg-deb --fsys-tarfile "$deb" |
    tar -xO ./usr/share/gocode/src/github.com/prometheus/alertmanager/asset/assets_vfsdata.go \
      >"$dest.vfsdata.go"
  python3 scripts/setup/alertmanager_ui.py "$dest.vfsdata.go" "$dest" >/dev/null
  rm "$dest.vfsdata.go"
}

for bin in prometheus promtool prometheus-alertmanager amtool; do
  command -v "$bin" >/dev/null || { echo "$bin missing: apt-get install prometheus prometheus-alertmanager" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

root=$work/prometheus/root
mkdir -p "$root/bin" "$root/usr/share/prometheus"
cp "$(command -v prometheus)" "$(command -v promtool)" "$root/bin/"
# The web directory links Debian's JavaScript packages (jquery, bootstrap4, ...): copied through
# the links. moment-timezone's data/ (214 MB of per-zone files) is left out: the pages load only
# moment-timezone-with-data.min.js.
rsync -rL --exclude=/static/moment-timezone/data/ /usr/share/prometheus/web/ "$root/usr/share/prometheus/web/"
build prometheus "$(version_of prometheus)-$REVISION" /bin/prometheus "$work/prometheus"

root=$work/alertmanager/root
mkdir -p "$root/bin" "$root/usr/share/prometheus/alertmanager/ui"
cp "$(command -v prometheus-alertmanager)" "$root/bin/alertmanager"
cp "$(command -v amtool)" "$root/bin/"
# Debian's Alertmanager reads its notification templates from disk instead of embedding them.
cp /usr/share/prometheus/alertmanager/default.tmpl /usr/share/prometheus/alertmanager/email.tmpl \
  "$root/usr/share/prometheus/alertmanager/"
alertmanager_ui "$root/usr/share/prometheus/alertmanager/ui"
build alertmanager "$(version_of prometheus-alertmanager)-$REVISION" /bin/alertmanager "$work/alertmanager"

bash scripts/build-images.sh --local-base --images exporter,standin,router,router_previous
