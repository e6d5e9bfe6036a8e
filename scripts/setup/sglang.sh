#!/usr/bin/env bash
# One virtual environment per SGLang version the contract suite verifies (versions.yaml
# sglang.verified), in .sglang/<version>/ (gitignored), idempotently:
#   sglang==<version> with --no-deps, then exactly sglang.venv_packages (also --no-deps, so the
#   set never floats); pip's download cache (~/.cache/pip) makes a re-install cheap.
# A venv whose marker file (.sglang/<version>/.specserve-packages) records the same package set
# is left alone. Any failure exits non-zero naming the version: CI must fail, never skip.
#
#   scripts/setup/sglang.sh              every verified version
#   scripts/setup/sglang.sh 0.5.23       only these versions (e.g. one being added)
# SPECSERVE_SGLANG_VENVS moves the venvs elsewhere (tests/contract/sglang_venv.py reads it too).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENVS=${SPECSERVE_SGLANG_VENVS:-$ROOT/.sglang}
PY=${PYTHON:-python3}
YAML_PY=$ROOT/.venv/bin/python
[[ -x $YAML_PY ]] || {
  echo "sglang.sh: $YAML_PY is missing; run bash scripts/setup/python.sh first" >&2; exit 1; }

fail() { echo "sglang.sh: SGLang $1: $2" >&2; exit 1; }

# versions.yaml is the only source of the versions and the package set.
read_versions() {
  "$YAML_PY" - "$ROOT/versions.yaml" "$1" <<'PYEOF'
import sys, yaml
section = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))["sglang"]
print("\n".join(section[sys.argv[2]]))
PYEOF
}

mapfile -t VERIFIED < <(read_versions verified)
mapfile -t PACKAGES < <(read_versions venv_packages)
(( ${#VERIFIED[@]} )) || fail "(none)" "versions.yaml sglang.verified is empty"
if (( $# )); then WANTED=("$@"); else WANTED=("${VERIFIED[@]}"); fi

expected_set() {  # what `pip freeze` must print, sorted like pip sorts it
  printf '%s\n' "sglang==$1" "${PACKAGES[@]}" | LC_ALL=C sort -f
}

install_one() {
  local version=$1 dir=$VENVS/$1 marker=$VENVS/$1/.specserve-packages want log
  want=$(expected_set "$version"; "$PY" -c 'import sys; print("python", sys.version.split()[0])')
  if [[ -x $dir/bin/python && -f $marker && $(cat "$marker") == "$want" ]]; then
    echo "sglang.sh: SGLang $version: up to date in $dir"; return 0
  fi
  # A venv built before the marker existed is adopted when it holds exactly the set.
  if [[ -x $dir/bin/python && ! -f $marker ]] \
    && [[ "$(expected_set "$version")" == "$("$dir/bin/python" -m pip freeze 2>/dev/null \
      | LC_ALL=C sort -f)" ]]; then
    printf '%s\n' "$want" > "$marker"
    echo "sglang.sh: SGLang $version: adopted existing venv $dir"; return 0
  fi
  echo "sglang.sh: SGLang $version: installing into $dir"
  log=$(mktemp)
  rm -rf "$dir"
  mkdir -p "$VENVS"
  "$PY" -m venv "$dir" >"$log" 2>&1 || { cat "$log" >&2; fail "$version" "python -m venv $dir failed"; }
  "$dir/bin/python" -m pip install -q --no-deps --disable-pip-version-check \
    "sglang==$version" "${PACKAGES[@]}" >"$log" 2>&1 || {
    tail -n 30 "$log" >&2
    fail "$version" "pip install --no-deps sglang==$version + versions.yaml sglang.venv_packages failed (see above); fix the pins or the package index"
  }
  # The suite needs the parser to import; prove it here so a broken set fails set-up, not tests.
  "$dir/bin/python" -c 'from sglang.srt.server_args import prepare_server_args' >"$log" 2>&1 || {
    tail -n 30 "$log" >&2
    fail "$version" "installed, but 'from sglang.srt.server_args import prepare_server_args' fails (see above)"
  }
  rm -f "$log"
  printf '%s\n' "$want" > "$marker"
  echo "sglang.sh: SGLang $version: installed"
}

for version in "${WANTED[@]}"; do install_one "$version"; done
