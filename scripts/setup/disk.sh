#!/usr/bin/env bash
# Fail early, with figures, when the disk cannot hold what the rest of the setup and the test run
# will write: a run that fills its disk fails hundreds of tests at random and ends in pytest's own
# ENOSPC traceback (CI once did). Counts only what is not there yet. Figures measured from a
# fresh clone (docs/testing.md "Disk"): the SGLang venvs 8.5 GB (each version on the dependency
# versions it declares: 0.5.21 2.7 GB, 0.5.23 3.4 GB, the shared packages 2.4 GB); the SGLang local base 6.1 GB
# plus its 3 GB wheelhouse while it builds; the other images 1.2 GB; a run's scratch and the
# images its tests rebuild 1.5 GB (pytest's temporary files 0.4 GB in a fresh-clone run; one
# checkout rebuilds its images from cache, so little else).
# SPECSERVE_DISK_CHECK=0 skips the check.
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ ${SPECSERVE_DISK_CHECK:-1} == 0 ]] && exit 0
PY=.venv/bin/python
[[ -x $PY ]] || PY=python3

pin() {  # pin sglang.pinned
  "$PY" -c 'import sys, yaml
v = yaml.safe_load(open("versions.yaml", encoding="utf-8"))
for k in sys.argv[1].split("."): v = v[k]
print(v)' "$1"
}
has_image() { docker image inspect "$1" >/dev/null 2>&1; }

need_mb=1536 parts="test scratch 1.5 GB"
add() { need_mb=$((need_mb + $1)); parts+=", $2"; }
compgen -G ".sglang/_deps-*" >/dev/null || add 8700 "SGLang venvs 8.5 GB"
sglang_base="$(pin upstream_images.sglang_local_base.repository):$(pin upstream_images.sglang_local_base.tag)"
has_image "$sglang_base" || add 9300 "SGLang local base 6.1 GB + 3 GB of wheels while it builds"
# The other images are all built FROM the local base: without it, none of them is there either.
has_image "$(pin upstream_images.local_base.repository):$(pin upstream_images.local_base.tag)" \
  || add 1200 "the base, monitoring, stand-in, exporter and router images 1.2 GB"

# The repository and Docker's data may be on different filesystems; where they share one, the
# whole need lands there.
repo_free=$(df -Pm . | awk 'NR==2 {print $4}')
docker_root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker)
mkdir -p "$docker_root" 2>/dev/null || true
docker_free=$(df -Pm "$docker_root" | awk 'NR==2 {print $4}')
free_mb=$(( repo_free < docker_free ? repo_free : docker_free ))
echo "disk: ${free_mb} MB free; this setup and test run still need about ${need_mb} MB ($parts)"
if (( free_mb < need_mb )); then
  echo "disk.sh: not enough disk for the setup and the test run: ${free_mb} MB free at $(pwd)" \
    "and $docker_root, about ${need_mb} MB needed ($parts). Free some space (docker system prune," \
    "old clones) or set SPECSERVE_DISK_CHECK=0 to try anyway." >&2
  exit 1
fi
