#!/usr/bin/env bash
# One virtual environment per SGLang version the contract suite verifies (versions.yaml
# sglang.verified), in .sglang/<version>/ (gitignored), idempotently:
#   .sglang/_deps-<hash>/  exactly sglang.venv_packages, --no-deps so the set never floats; shared
#                          by every version (torch's CUDA libraries, numpy, pydantic: most of the
#                          set-up time). Named by the hash of its set, so a changed set is a new
#                          directory and a venv built on the old one keeps it
#   .sglang/<version>/     sglang==<version> and sglang.version_packages[<version>] (what that
#                          release declares differently: torch, transformers, ...), --no-deps,
#                          plus a .pth file that puts its _deps on its sys.path;
#                          `.sglang/<version>/bin/python` is the interpreter to use
# After installing, scripts/setup/sglang_declared.py proves the venv holds what SGLang's own
# wheel declares (its METADATA, through every requirement of what is installed) and exactly
# the pinned versions; a mismatch fails set-up naming the package.
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

# versions.yaml is the only source of the versions and the package sets.
read_versions() {  # KEY [VERSION]: sglang.KEY, or sglang.KEY[VERSION] (empty when absent)
  "$YAML_PY" - "$ROOT/versions.yaml" "$@" <<'PYEOF'
import sys, yaml
section = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))["sglang"]
value = section[sys.argv[2]] if len(sys.argv) == 3 else (section.get(sys.argv[2]) or {}).get(sys.argv[3]) or []
if value:
    print("\n".join(value))
PYEOF
}

mapfile -t VERIFIED < <(read_versions verified)
mapfile -t PACKAGES < <(read_versions venv_packages)
(( ${#VERIFIED[@]} )) || fail "(none)" "versions.yaml sglang.verified is empty"
if (( $# )); then WANTED=("$@"); else WANTED=("${VERIFIED[@]}"); fi
PYTHON_LINE="python $("$PY" -c 'import sys; print(sys.version.split()[0])')"

# A package set as the marker file records it: sorted as `LC_ALL=C sort -f` orders, then Python.
package_set() { printf '%s\n' "$@" | LC_ALL=C sort -f; echo "$PYTHON_LINE"; }
DEPS_SET=$(package_set "${PACKAGES[@]}")
DEPS=$VENVS/_deps-$(printf '%s' "$DEPS_SET" | sha256sum | cut -c1-12)

marker_ok() { [[ -x $1/bin/python && -f $1/.specserve-packages && $(cat "$1/.specserve-packages") == "$2" ]]; }
purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
# The package index only, never the configured find-links: a find-links directory may hold a
# local build (torch 2.13.0+cpu here) that `==2.13.0` also admits and pip prefers (a local
# version sorts above its release), and the venv must hold the release SGLang declares.
NO_LINKS=$VENVS/.no-find-links
# pip of the _deps venv installs into TARGET's interpreter (`pip --python`): the version venvs
# are made without pip, so no setuptools of their own shadows the pinned one (torch requires
# setuptools >= 77; venv's bundled one is 65).
pip_into() {  # TARGET_PYTHON PACKAGE...
  local target=$1; shift
  mkdir -p "$NO_LINKS"
  PIP_FIND_LINKS=$NO_LINKS "$DEPS/bin/python" -m pip --python "$target" install -q --no-deps \
    --no-compile --disable-pip-version-check "$@"
}

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
trap 'rm -f "$LOG" "$LOG.json"' EXIT

ensure_deps() {
  marker_ok "$DEPS" "$DEPS_SET" && return 0
  echo "sglang.sh: installing the shared packages (versions.yaml sglang.venv_packages) into $DEPS"
  rm -rf "$DEPS.new"
  mkdir -p "$VENVS"
  "$PY" -m venv "$DEPS.new" >"$LOG" 2>&1 || {
    cat "$LOG" >&2; fail "$1" "python -m venv $DEPS.new failed"; }
  # --no-compile: byte-compiling all of torch, sympy and transformers is most of an install;
  # the modules SGLang imports are compiled by the warm-up import in install_one and by the
  # tests' first run (tests/contract/sglang_venv.py lets them write bytecode).
  mkdir -p "$NO_LINKS"
  PIP_FIND_LINKS=$NO_LINKS "$DEPS.new/bin/python" -m pip install -q --no-deps --no-compile \
    --disable-pip-version-check "${PACKAGES[@]}" >"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2
    fail "$1" "pip install --no-deps of versions.yaml sglang.venv_packages failed (see above); fix the pins or the package index"
  }
  printf '%s\n' "$DEPS_SET" > "$DEPS.new/.specserve-packages"
  swap_in "$DEPS"
}

# The venvs, and the deps directory each one's .pth names.
deps_of() {  # VENV: the deps directory its .pth names (site-packages' third parent), or nothing
  local pth
  pth=$(compgen -G "$1/lib/python*/site-packages/specserve-sglang-deps.pth" | head -n 1 || true)
  if [[ -n $pth ]]; then dirname "$(dirname "$(dirname "$(cat "$pth")")")"; fi
}

# A deps directory no venv (current or kept .old) names is left over from an older set.
prune_deps() {
  local kept=() dir
  for dir in "$VENVS"/*; do
    [[ -d $dir && $(basename "$dir") != _deps* ]] || continue
    kept+=("$(deps_of "$dir")")
  done
  for dir in "$VENVS"/_deps "$VENVS"/_deps-*; do
    [[ -d $dir && $dir != *.new && $dir != "$DEPS" ]] || continue
    [[ " ${kept[*]} " == *" $dir "* ]] && continue
    echo "sglang.sh: removing $dir (no venv uses it any more)"
    rm -rf "$dir"
  done
}

# What sglang_declared.py says of the venv at $1, for version $2 and its pins ($3..): nothing
# when it holds what SGLang declares and exactly the pins, else one line per problem.
declared_problems() {
  local dir=$1 version=$2; shift 2
  "$YAML_PY" -c 'import json, sys; print(json.dumps({"pins": sys.argv[1:]}))' "$@" \
    | "$dir/bin/python" "$ROOT/scripts/setup/sglang_declared.py" >"$LOG.json" 2>"$LOG" || {
    tail -n 30 "$LOG" >&2; fail "$version" "scripts/setup/sglang_declared.py failed in $dir (see above)"; }
  "$YAML_PY" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["problems"]))' "$LOG.json"
}

install_one() {
  local version=$1 dir=$VENVS/$1 want site problems
  local -a own
  mapfile -t own < <(read_versions version_packages "$version")
  (( ${#own[@]} )) || fail "$version" "versions.yaml sglang.version_packages has no \"$version\" entry; list the pins this release declares (its wheel's METADATA Requires-Dist: torch, transformers, tokenizers, openai, and what torch declares)"
  want=$(package_set "sglang==$version" "${own[@]}" "${PACKAGES[@]}")
  # Up to date: a venv holding exactly this set, through the deps directory of this set.
  if marker_ok "$dir" "$want" && [[ $(deps_of "$dir") == "$DEPS" ]] && marker_ok "$DEPS" "$DEPS_SET"; then
    echo "sglang.sh: SGLang $version: up to date in $dir"; return 0
  fi
  ensure_deps "$version"
  echo "sglang.sh: SGLang $version: installing into $dir"
  rm -rf "$dir.new"
  "$PY" -m venv --without-pip "$dir.new" >"$LOG" 2>&1 || {
    cat "$LOG" >&2; fail "$version" "python -m venv $dir.new failed"; }
  pip_into "$dir.new/bin/python" "sglang==$version" "${own[@]}" >"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2
    fail "$version" "pip install --no-deps sglang==$version ${own[*]} failed (see above); is $version on the package index, are versions.yaml sglang.version_packages[\"$version\"] releases?"
  }
  site=$(purelib "$dir.new")
  purelib "$DEPS" > "$site/specserve-sglang-deps.pth"
  # Judged before the swap, so a venv that breaks SGLang's declared versions never replaces one.
  problems=$(declared_problems "$dir.new" "$version" "sglang==$version" "${own[@]}" "${PACKAGES[@]}")
  if [[ -n $problems ]]; then
    echo "$problems" | sed 's/^/sglang.sh:   /' >&2
    rm -rf "$dir.new"
    fail "$version" "the venv does not hold what SGLang $version declares (above); take the versions from its wheel's METADATA into versions.yaml sglang.version_packages[\"$version\"] / venv_packages"
  fi
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
prune_deps
