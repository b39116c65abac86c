#!/usr/bin/env bash
# Build a Python base image without a container registry.
#
# Uses debootstrap against Debian's package mirror (reachable where a registry is not), then
# `docker import`. Real users with a registry keep `FROM python:3.x-slim`; this is the fallback.
#
# Usage: build-base-offline.sh TAG [SUITE] [EXTRA_PACKAGES]
#   TAG             image tag to create, e.g. sandbox-replay-base:bookworm
#   SUITE           Debian suite (default bookworm; bullseye gives python3.9)
#   EXTRA_PACKAGES  comma-separated Debian packages added to python3,ca-certificates
set -euo pipefail

tag=${1:?usage: build-base-offline.sh TAG [SUITE] [EXTRA_PACKAGES]}
suite=${2:-bookworm}
extra=${3:-}
packages="python3,ca-certificates${extra:+,$extra}"

command -v debootstrap >/dev/null || { echo "debootstrap not found: apt-get install -y debootstrap" >&2; exit 6; }
command -v docker >/dev/null || { echo "docker CLI not found" >&2; exit 6; }

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/sandbox-replay-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT

echo "debootstrap: suite=$suite packages=$packages" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" >"$rootfs.log" 2>&1 || {
  tail -n 30 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 6; }
rm -f "$rootfs.log"
# Keep the image small: package caches and docs are not needed to run Python.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
       "$rootfs"/usr/share/doc "$rootfs"/usr/share/man
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' - "$tag" >/dev/null
echo "$tag"
