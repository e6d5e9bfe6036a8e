#!/usr/bin/env bash
# SGLang's router (sglang-router on PyPI, the binary the chart's lmsysorg/sgl-model-gateway image
# runs) in .cache/router-venv (gitignored), idempotently, at the versions.yaml pins:
#   tools.sglang_router           the router itself
#   tools.sglang_router_packages  its import closure, installed --no-deps so nothing floats
# It runs on a CPU: tests put the real router in front of stand-in servers on loopback.
#
#   scripts/setup/router.sh     install what is missing, print the venv's bin directory
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=$ROOT/.cache/router-venv
PY=${PYTHON:-$ROOT/.venv/bin/python}
[[ -x $PY ]] || PY=python3

pins() {
  "$PY" - "$ROOT/versions.yaml" <<'PYEOF'
import sys, yaml
tools = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))["tools"]
print(f"sglang-router=={tools['sglang_router']}")
for requirement in tools["sglang_router_packages"]:
    print(requirement)
PYEOF
}

want=$(pins)
stamp=$VENV/.specserve-pins
if ! [[ -x $VENV/bin/python && -f $stamp ]] || [[ $(cat "$stamp") != "$want" ]]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  # shellcheck disable=SC2086  # one requirement per word
  "$VENV/bin/python" -m pip install --quiet --no-deps --only-binary=:all: $want >&2
  "$VENV/bin/python" -c 'import sglang_router.launch_router' >&2
  printf '%s\n' "$want" > "$stamp"
fi
echo "$VENV/bin"
