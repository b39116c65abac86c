#!/usr/bin/env bash
# Make sure bubblewrap (bwrap), the namespace backend's sandbox, is installed; on Debian, as
# root, install it with apt-get when it is missing (as ensure-engine.sh does docker.io).
#
# Used by `make test` (through the `bwrap` target) and .ci/run. Idempotent: does nothing when
# `bwrap --version` works. Exit 0: bwrap present; exit 6: it is missing and cannot be installed
# here (one line says why). Whether user namespaces are allowed is `sandbox-replay doctor
# --backend namespace`'s check; under CI=true the tests that need bwrap fail when it is unusable.
set -euo pipefail

if command -v bwrap >/dev/null 2>&1 && bwrap --version >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ensure-bwrap: bwrap missing and installing it needs root: apt-get install -y bubblewrap" >&2
  exit 6
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-bwrap: bwrap missing and no apt-get here: install your distribution's bubblewrap" >&2
  exit 6
fi
echo "ensure-bwrap: installing bubblewrap with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq bubblewrap >/dev/null 2>&1 || {
  apt-get update -qq
  apt-get install -y -qq bubblewrap >/dev/null
}
bwrap --version
