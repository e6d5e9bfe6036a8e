#!/usr/bin/env bash
# Build the local base image CI uses in place of upstream images, which cannot be pulled here.
# Every Dockerfile takes its base as a build argument: users build FROM the real upstream image,
# CI builds FROM this one. Debian bookworm + python3 (3.11), the same Python as python:3.11-slim.
# The SGLang image's CI base (specserve-local/sglang, docker/sglang-local-base) is built FROM
# this one by scripts/build-images.sh --local-base --images sglang, which makes its wheelhouse.
set -euo pipefail
IMAGE="${SPECSERVE_LOCAL_BASE_IMAGE:-specserve-local/bookworm-python:3.11}"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE present"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap not found: apt-get install debootstrap" >&2; exit 1; }
root=$(mktemp -d /tmp/specserve-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,procps \
  bookworm "$root" >/tmp/specserve-debootstrap.log 2>&1 || {
  tail -20 /tmp/specserve-debootstrap.log >&2; exit 1; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "built base image $IMAGE"
