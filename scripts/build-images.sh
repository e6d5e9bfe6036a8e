#!/usr/bin/env bash
# Build specserve's images with every tag and base taken from versions.yaml.
#
#   scripts/build-images.sh                 exporter + standin FROM python, sglang FROM lmsysorg/sglang
#   scripts/build-images.sh --local-base    exporter + standin FROM specserve-local/bookworm-python
#                                           (CI: nothing can be pulled)
#   --local-base --images sglang            sglang FROM specserve-local/sglang, a GPU-less stand-in
#                                           for lmsysorg/sglang built here first
#                                           (docker/sglang-local-base: real sglang, CUDA torch, no GPU)
#   --images router    SGLang's router from its pinned PyPI wheel (tools.smg), FROM
#                      the same Python base as the exporter (docker/router)
#   --images router_previous  the router a fleet upgrades from (tools.router_previous), for the
#                      upgrade test
#   --images a,b       build only these (exporter, standin, sglang, router, router_previous)
#   --wheelhouse-only  stop after the wheelhouse
#
# Docker builds run without network: a wheelhouse is made here on the host (pip wheel / pip
# download, binary wheels only) and COPYed into a small build context (build/image-context), then
# installed with `pip install --no-index`. The wheelhouse is rebuilt only when the sources or pins
# change, so unchanged inputs give Docker identical contexts and every layer comes from cache.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
[[ -x $PY ]] || PY=python3
CTX=$ROOT/build/image-context
WHEELS=$CTX/wheelhouse
# One build at a time per checkout: two at once (parallel test files) would rewrite the same
# wheelhouse and context under each other. The second waits for the first.
mkdir -p "$ROOT/build"
exec 9>"$ROOT/build/.build-images.lock"
flock 9
# Interpreters the SGLang image's Python might be (specserve needs >= 3.11): its venv needs
# binary wheels for that one.
SGLANG_PYTHONS=${SPECSERVE_SGLANG_PYTHONS:-"3.11 3.12 3.13"}
# Dependencies the stand-in and sglang images never import (the launcher and the stand-in need
# none of them; the exporter image keeps them for --source docker/kubernetes): kubernetes is
# ~130 MB. grafana-foundation-sdk (5 MB) stays: the `specserve` command those images put on
# PATH imports every subcommand, `specserve rules` included, so without it `specserve check`
# fails there (tests/images/test_sglang_image.py runs it).
# tests/images/test_dockerfiles.py checks that the launcher and stand-in do not import them.
LEAN_EXCLUDE=${SPECSERVE_LEAN_EXCLUDE:-"kubernetes docker"}

local_base=0
images=""
wheelhouse_only=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --local-base) local_base=1 ;;
    --images) images=${2:?--images needs a comma-separated list}; shift ;;
    --images=*) images=${1#--images=} ;;
    --wheelhouse-only) wheelhouse_only=1 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "build-images.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z $images ]]; then
  if (( local_base )); then images="exporter,standin"; else images="exporter,standin,sglang"; fi
fi

# One value out of versions.yaml, e.g. `pin upstream_images.python.tag`.
pin() {
  "$PY" - "$ROOT/versions.yaml" "$1" <<'PYEOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
value = doc
for key in sys.argv[2].split("."):
    if not isinstance(value, dict) or key not in value:
        sys.exit(f"versions.yaml has no {sys.argv[2]!r}")
    value = value[key]
print(value)
PYEOF
}

version=$("$PY" -c 'import tomllib,sys; print(tomllib.load(open(sys.argv[1],"rb"))["project"]["version"])' "$ROOT/pyproject.toml")

# --- wheelhouse -------------------------------------------------------------------------------
pythons=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
# FROM the local base, the SGLang image's Python is known (and the host's, so the wheelhouse of
# the other images serves it unchanged, and every layer stays cached).
if [[ ,$images, == *,sglang,* ]]; then
  if (( local_base )); then pythons="$pythons $(pin upstream_images.local_base.tag)"
  else pythons="$pythons $SGLANG_PYTHONS"; fi
fi
pythons=$(tr ' ' '\n' <<<"$pythons" | sort -u | tr '\n' ' ')

src_hash=$(cd "$ROOT" && {
  git ls-files -co --exclude-standard -- specserve exporter pyproject.toml constraints.txt \
    | grep -v -e '__pycache__' -e '\.pyc$' | sort | xargs -r sha256sum
  echo "pythons=$pythons exclude=$LEAN_EXCLUDE"
} | sha256sum | cut -d' ' -f1)

mkdir -p "$WHEELS"
if [[ -f $WHEELS/.stamp && $(cat "$WHEELS/.stamp") == "$src_hash" ]]; then
  echo "wheelhouse up to date ($WHEELS)"
else
  echo "building wheelhouse for python $pythons"
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  start=$SECONDS
  "$PY" -m pip wheel --quiet --no-deps --wheel-dir "$WHEELS" "$ROOT"
  rm -rf "$ROOT/build/lib" "$ROOT/build/bdist."* 2>/dev/null || true
  wheel=$(ls "$WHEELS"/specserve-"$version"-*.whl)
  constraints=()
  [[ -f $ROOT/constraints.txt ]] && constraints=(--constraint "$ROOT/constraints.txt")
  for v in $pythons; do
    "$PY" -m pip download --quiet --dest "$WHEELS" --only-binary=:all: \
      --python-version "$v" --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform linux_x86_64 "${constraints[@]}" "$wheel"
  done
  # The images install specserve --no-deps plus these exact pins (from the wheel's metadata).
  "$PY" - "$wheel" "$LEAN_EXCLUDE" >"$WHEELS/requirements-lean.txt" <<'PYEOF'
import re, sys, zipfile
from email.parser import Parser
wheel, exclude = sys.argv[1], set(sys.argv[2].lower().split())
with zipfile.ZipFile(wheel) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(zf.read(name).decode())
for req in meta.get_all("Requires-Dist") or []:
    if "extra ==" in req:
        continue
    project = re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]
    if project.lower() not in exclude:
        print(req)
PYEOF
  echo "$src_hash" >"$WHEELS/.stamp"
  echo "wheelhouse built in $((SECONDS - start)) s: $(ls "$WHEELS"/*.whl | wc -l) wheels"
fi
(( wheelhouse_only )) && exit 0

# --- images -----------------------------------------------------------------------------------
if [[ ,$images, == *,standin,* ]]; then
  # The stand-in profile and the config-only model dirs it names by relative path, laid out
  # as in the repository so the profile works unchanged under /usr/share/specserve.
  "$PY" - "$ROOT" "$CTX/standin-root" <<'PYEOF'
import shutil, sys
from pathlib import Path
import yaml
root, dest = Path(sys.argv[1]), Path(sys.argv[2])
profile = root / "profiles" / "standin-cpu.yaml"
if not profile.is_file():
    sys.exit("build-images.sh: profiles/standin-cpu.yaml is missing (the stand-in image's profile)")
doc = yaml.safe_load(profile.read_text(encoding="utf-8"))
wanted = {profile: dest / "profiles" / profile.name}
for section in ("target", "drafter"):
    path = (doc.get(section) or {}).get("path") or ""
    if path.startswith(("./", "../")):
        src = (profile.parent / path).resolve()
        for f in sorted(src.glob("*.json")):
            wanted[f] = dest / f.relative_to(root)
for src, dst in wanted.items():
    # Copy only on change: unchanged files keep the context identical for Docker's cache.
    if not dst.exists() or dst.read_bytes() != src.read_bytes():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
PYEOF
fi

if (( local_base )); then
  python_base="$(pin upstream_images.local_base.repository):$(pin upstream_images.local_base.tag)"
  docker image inspect "$python_base" >/dev/null 2>&1 || {
    echo "build-images.sh: $python_base is missing: run scripts/setup/base-image.sh" >&2
    exit 1
  }
else
  python_base="$(pin upstream_images.python.repository):$(pin upstream_images.python.tag)"
fi
sglang_base="$(pin upstream_images.sglang.repository):$(pin upstream_images.sglang.tag)"
sglang_version=$(pin sglang.pinned)

# --- CI's stand-in for the SGLang base (--local-base --images sglang) ---------------------------
# The real sglang package and exactly the pins versions.yaml names (sglang.venv_packages and
# version_packages[pinned], as the contract venvs of scripts/setup/sglang.sh, plus
# sglang.local_base_packages), all --no-deps, downloaded through pip's cache (~/.cache/pip, which
# sglang.sh fills too) and the configured indexes (the torch wheels on local disk) into a
# wheelhouse of its own, so the small context of the
# other images stays small. The base is rebuilt only when that set changes (its label).
if (( local_base )) && [[ ,$images, == *,sglang,* ]]; then
  sglang_base="$(pin upstream_images.sglang_local_base.repository):$(pin upstream_images.sglang_local_base.tag)"
  base_py=$(pin upstream_images.local_base.tag)
  base_ctx=$ROOT/build/sglang-base-context
  base_wheels=$ROOT/build/sglang-base-wheelhouse
  requirements=$("$PY" - "$ROOT/versions.yaml" <<'PYEOF'
import sys, yaml
section = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))["sglang"]
pins = [f"sglang=={section['pinned']}", *section["venv_packages"],
        *section["version_packages"][section["pinned"]], *section["local_base_packages"]]
print("\n".join(pins))
PYEOF
)
  base_hash=$({ echo "$requirements"; echo "python=$base_py"
    sha256sum <"$ROOT/docker/sglang-local-base/Dockerfile"; } | sha256sum | cut -d' ' -f1)
  if [[ $(docker image inspect --format '{{ index .Config.Labels "io.specserve.inputs" }}' \
      "$sglang_base" 2>/dev/null) == "$base_hash" ]]; then
    echo "SGLang local base $sglang_base up to date"
  else
    start=$SECONDS
    rm -rf "$base_wheels" "$base_ctx" && mkdir -p "$base_wheels" "$base_ctx"
    echo "$requirements" >"$base_wheels/requirements.txt"
    # Every manylinux tag bookworm's glibc (2.36) runs: sglang's own wheel is manylinux_2_34.
    platforms=()
    for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
    # Never the configured find-links: a local torch 2.13.0+cpu there satisfies ==2.13.0 and
    # pip prefers it, where upstream's image (and SGLang's METADATA) has the CUDA release.
    mkdir -p "$base_ctx/no-find-links"
    PIP_FIND_LINKS=$base_ctx/no-find-links \
    "$PY" -m pip download --quiet --no-deps --dest "$base_wheels" --only-binary=:all: \
      --python-version "$base_py" --implementation cp "${platforms[@]}" \
      --platform manylinux2014_x86_64 --platform linux_x86_64 \
      --requirement "$base_wheels/requirements.txt" || {
      echo "build-images.sh: pip could not download the SGLang local base's pins" \
        "(versions.yaml sglang.venv_packages / local_base_packages); fix the pins or the index" >&2
      exit 1
    }
    # The wheelhouse (~3 GB: CUDA torch and its nvidia-* libraries) reaches the build over
    # loopback, not through the context: a COPY would keep it as a layer of the image (9.2 GB
    # instead of 6.2 GB) and send it to the daemon as a context first. A CI run once ran out of
    # disk (docs/testing.md). Served from a port the kernel picks, on 127.0.0.1 only; the build
    # runs with host networking for that one fetch and nothing else is reachable from it.
    port_file=$base_ctx/.port
    "$PY" - "$base_wheels" "$port_file" <<'PYEOF' &
import functools, http.server, sys

class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

server = http.server.ThreadingHTTPServer(
    ("127.0.0.1", 0), functools.partial(Quiet, directory=sys.argv[1]))
with open(sys.argv[2] + ".tmp", "w") as out:
    out.write(str(server.server_address[1]))
import os; os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
PYEOF
    server_pid=$!
    trap 'kill "$server_pid" 2>/dev/null || true' EXIT
    for _ in $(seq 1 100); do [[ -s $port_file ]] && break; sleep 0.1; done
    [[ -s $port_file ]] || { echo "build-images.sh: the wheelhouse server did not start" >&2; exit 1; }
    docker build --quiet --network host -f "$ROOT/docker/sglang-local-base/Dockerfile" \
      --build-arg "BASE_IMAGE=$python_base" --build-arg "SGLANG_VERSION=$sglang_version" \
      --build-arg "WHEELHOUSE_URL=http://127.0.0.1:$(cat "$port_file")" \
      --label "io.specserve.inputs=$base_hash" -t "$sglang_base" "$base_ctx" >/dev/null
    kill "$server_pid" 2>/dev/null || true
    trap - EXIT
    # The image is the cache (its inputs label); the wheels are not needed again.
    rm -rf "$base_wheels" "$base_ctx"
    size=$(docker image inspect --format '{{.Size}}' "$sglang_base")
    echo "built $sglang_base FROM $python_base in $((SECONDS - start)) s, $((size / 1000000)) MB"
  fi
fi

# --- SGLang's router from PyPI (--images router, router_previous) --------------------------------
# The wheel and exactly its closure as versions.yaml pins them (router: tools.smg and
# tools.smg_packages; router_previous: tools.router_previous and tools.router_previous_packages,
# the release a fleet upgrades from), binary wheels for the base image's Python, each in a
# context of its own (the other images' context stays as it is, and so their cache).
router_context() {  # router_context NAME: prints the context directory, made or reused
  local name=$1 ctx=$ROOT/build/${1//_/-}-context requirements hash
  requirements=$("$PY" - "$ROOT/versions.yaml" "$name" <<'PYEOF'
import sys, yaml
tools = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))["tools"]
if sys.argv[2] == "router":
    print("\n".join([f"smg=={tools['smg']}", *tools["smg_packages"]]))
else:
    print("\n".join([tools["router_previous"], *tools["router_previous_packages"]]))
PYEOF
)
  hash=$(echo "$requirements python=$router_py" | sha256sum | cut -d' ' -f1)
  mkdir -p "$ctx/router-wheelhouse"
  if [[ $(cat "$ctx/router-wheelhouse/.stamp" 2>/dev/null) != "$hash" ]]; then
    rm -rf "$ctx/router-wheelhouse" && mkdir -p "$ctx/router-wheelhouse"
    echo "$requirements" >"$ctx/router-wheelhouse/requirements.txt"
    "$PY" -m pip download --quiet --no-deps --dest "$ctx/router-wheelhouse" \
      --only-binary=:all: --python-version "$router_py" --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform linux_x86_64 \
      --requirement "$ctx/router-wheelhouse/requirements.txt" >&2 || {
      echo "build-images.sh: pip could not download the pins of image $name (versions.yaml" \
        "tools.smg / tools.smg_packages, or tools.router_previous*); fix the pins or the index" >&2
      exit 1
    }
    echo "$hash" >"$ctx/router-wheelhouse/.stamp"
  fi
  # Copied only on change, so an unchanged context keeps every layer cached.
  cmp -s "$ROOT/docker/router/entrypoint.sh" "$ctx/router-entrypoint.sh" \
    || cp "$ROOT/docker/router/entrypoint.sh" "$ctx/router-entrypoint.sh"
  echo "$ctx"
}
router_py=$(pin upstream_images.local_base.tag)

IFS=, read -r -a wanted <<<"$images"
for name in "${wanted[@]}"; do
  context=$CTX
  case $name in
    exporter|standin) base=$python_base ;;
    sglang) base=$sglang_base ;;
    router|router_previous) base=$python_base; context=$(router_context "$name") || exit 1 ;;
    *) echo "build-images.sh: unknown image '$name' (exporter, standin, sglang, router, router_previous)" >&2; exit 2 ;;
  esac
  ref="$(pin "specserve_images.$name.repository"):$(pin "specserve_images.$name.tag")"
  dockerfile="$ROOT/$(pin "specserve_images.$name.dockerfile")"
  start=$SECONDS
  extra=()
  [[ $name == sglang ]] && extra=(--build-arg "SGLANG_VERSION=$sglang_version")
  [[ $name == router ]] && extra=(--build-arg "SMG_VERSION=$(pin tools.smg)")
  if [[ $name == router_previous ]]; then
    previous=$(pin tools.router_previous)
    extra=(--build-arg "SMG_VERSION=${previous##*==}" --build-arg "ROUTER_MODULE=sglang_router")
  fi
  docker build --quiet -f "$dockerfile" \
    --build-arg "BASE_IMAGE=$base" --build-arg "SPECSERVE_VERSION=$version" "${extra[@]}" \
    -t "$ref" "$context" >/dev/null
  size=$(docker image inspect --format '{{.Size}}' "$ref")
  echo "built $ref FROM $base in $((SECONDS - start)) s, $((size / 1000000)) MB"
done
