#!/usr/bin/env bash
# One virtual environment per SGLang version the contract suite verifies (versions.yaml
# sglang.verified), in .sglang/<version>/ (gitignored), idempotently:
#   .sglang/_deps/      exactly sglang.venv_packages, --no-deps so the set never floats; shared
#                       by every version (installing torch once instead of once per version is
#                       most of the set-up time)
#   .sglang/<version>/  sglang==<version> with --no-deps, plus a .pth file that puts _deps on
#                       its sys.path; `.sglang/<version>/bin/python` is the interpreter to use
# pip's download cache (~/.cache/pip) makes a re-install cheap. A venv whose marker file
# (.specserve-packages) records the same package set is left alone; a changed set is built
# beside the old venv and swapped in, so tests running meanwhile keep a working one. Any failure
# exits non-zero naming the version: CI must fail, never skip.
#
#   scripts/setup/sglang.sh              every verified version
#   scripts/setup/sglang.sh 0.5.23       only these versions (e.g. one being added)
# SPECSERVE_SGLANG_VENVS moves the venvs elsewhere (tests/contract/sglang_venv.py reads it too).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENVS=${SPECSERVE_SGLANG_VENVS:-$ROOT/.sglang}
DEPS=$VENVS/_deps
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
PYTHON_LINE="python $("$PY" -c 'import sys; print(sys.version.split()[0])')"

marker_ok() { [[ -x $1/bin/python && -f $1/.specserve-packages && $(cat "$1/.specserve-packages") == "$2" ]]; }
purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# Replace $1 by the freshly built $1.new in two renames (a venv works from its new path: its
# interpreter finds pyvenv.cfg and site-packages relative to itself). The replaced venv stays
# as $1.old until the next swap: a test process still running from it imports lazily (SGLang's
# resolution imports model code minutes after start) and would fail on a deleted tree.
swap_in() {
  rm -rf "$1.old"
  if [[ -e $1 ]]; then mv "$1" "$1.old"; fi
  mv "$1.new" "$1"
}

LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

ensure_deps() {
  local want
  want=$(printf '%s\n' "${PACKAGES[@]}" | LC_ALL=C sort -f; echo "$PYTHON_LINE")
  marker_ok "$DEPS" "$want" && return 0
  echo "sglang.sh: installing the shared packages (versions.yaml sglang.venv_packages) into $DEPS"
  rm -rf "$DEPS.new"
  mkdir -p "$VENVS"
  "$PY" -m venv "$DEPS.new" >"$LOG" 2>&1 || {
    cat "$LOG" >&2; fail "$1" "python -m venv $DEPS.new failed"; }
  # --no-compile: byte-compiling all of torch, sympy and transformers is most of an install;
  # the modules SGLang imports are compiled by the warm-up import in install_one and by the
  # tests' first run (tests/contract/sglang_venv.py lets them write bytecode).
  "$DEPS.new/bin/python" -m pip install -q --no-deps --no-compile --disable-pip-version-check \
    "${PACKAGES[@]}" >"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2
    fail "$1" "pip install --no-deps of versions.yaml sglang.venv_packages failed (see above); fix the pins or the package index"
  }
  printf '%s\n' "$want" > "$DEPS.new/.specserve-packages"
  swap_in "$DEPS"
}

install_one() {
  local version=$1 dir=$VENVS/$1 want site
  want=$(printf '%s\n' "sglang==$version" "${PACKAGES[@]}" | LC_ALL=C sort -f; echo "$PYTHON_LINE")
  # Up to date: a venv holding exactly this set (whole, or through the _deps .pth whose own
  # marker must then match too).
  if marker_ok "$dir" "$want" && { [[ ! -f $(purelib "$dir")/specserve-sglang-deps.pth ]] \
    || marker_ok "$DEPS" "$(printf '%s\n' "${PACKAGES[@]}" | LC_ALL=C sort -f; echo "$PYTHON_LINE")"; }; then
    echo "sglang.sh: SGLang $version: up to date in $dir"; return 0
  fi
  ensure_deps "$version"
  echo "sglang.sh: SGLang $version: installing into $dir"
  rm -rf "$dir.new"
  "$PY" -m venv "$dir.new" >"$LOG" 2>&1 || {
    cat "$LOG" >&2; fail "$version" "python -m venv $dir.new failed"; }
  "$dir.new/bin/python" -m pip install -q --no-deps --no-compile --disable-pip-version-check \
    "sglang==$version" >"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2
    fail "$version" "pip install --no-deps sglang==$version failed (see above); is $version on the package index?"
  }
  site=$(purelib "$dir.new")
  purelib "$DEPS" > "$site/specserve-sglang-deps.pth"
  swap_in "$dir"
  # The suite needs the parser and SGLang's resolution (ServerArgs.resolve_once: model configs,
  # transformers, torch, torchvision) to run on this CPU; prove it here on a config-only fixture
  # so a broken set fails set-up, not tests. It also writes the bytecode of what it imports, even
  # where PYTHONDONTWRITEBYTECODE is set: uncompiled, each test process would recompile it.
  env -u PYTHONDONTWRITEBYTECODE "$dir/bin/python" -c \
    'import sys; from sglang.srt.server_args import prepare_server_args
prepare_server_args(["--model-path", sys.argv[1], "--device", "cpu"]).resolve_once()' \
    "$ROOT/tests/fixtures/models/Llama-3.1-8B-Instruct" >"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2
    rm -f "$dir/.specserve-packages"
    fail "$version" "installed, but SGLang's prepare_server_args + resolve_once on --device cpu fails (see above)"
  }
  printf '%s\n' "$want" > "$dir/.specserve-packages"
  echo "sglang.sh: SGLang $version: installed"
}

for version in "${WANTED[@]}"; do install_one "$version"; done
