#!/usr/bin/env bash
# SGLang's router (smg on PyPI, the binary the chart's lightseekorg/smg image runs) in
# .cache/router-venv (gitignored), idempotently, at the versions.yaml pins:
#   tools.smg           the router itself
#   tools.smg_packages  what `smg launch` imports, installed --no-deps so nothing floats
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
print(f"smg=={tools['smg']}")
for requirement in tools["smg_packages"]:
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
  "$VENV/bin/python" -c 'import smg.launch_router, smg.router' >&2
  printf '%s\n' "$want" > "$stamp"
fi
echo "$VENV/bin"
