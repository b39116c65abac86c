#!/usr/bin/env bash
# Make sure a usable Docker engine answers; on Debian, install and start one when none does.
#
# Used by `make test`/`make demo`/`make image` and by .ci/run. Idempotent: when `docker info`
# already works it does nothing. Otherwise it installs docker.io (and debootstrap, for the
# offline base image) with apt when dockerd is missing, starts dockerd in the background, and
# waits (bounded by SANDBOX_REPLAY_DOCKERD_WAIT_S, default 90 s) until it answers.
#
# OCI runtimes: besides the default runc, crun (faster to start) and runsc (gVisor, a user-space
# kernel boundary) are installed with apt when dockerd is, and registered in the engine's
# daemon.json ("runtimes"; $SANDBOX_REPLAY_DOCKERD_CONFIG, default /etc/docker/daemon.json,
# other keys kept) before a dockerd is started here, so `--runtime crun` / `--runtime runsc`
# work with it. An engine that already answers is never restarted: its daemon.json is updated
# for its next start only (as root, when the binaries are there). runsc is registered with
# --network=none: sandboxes have no network anyway, and gVisor refuses to set one up when the
# host itself runs in a container.
#
# The pid of a dockerd started here is written to $SANDBOX_REPLAY_DOCKERD_PIDFILE
# (default /tmp/sandbox-replay-dockerd.pid) so that .ci/run can stop the engine it started.
# Exit 0: engine usable; exit 6: it could not be made usable (one line says why).
set -euo pipefail

pidfile=${SANDBOX_REPLAY_DOCKERD_PIDFILE:-/tmp/sandbox-replay-dockerd.pid}
logfile=${SANDBOX_REPLAY_DOCKERD_LOG:-/tmp/sandbox-replay-dockerd.log}
wait_s=${SANDBOX_REPLAY_DOCKERD_WAIT_S:-90}

engine_ok() {
  command -v docker >/dev/null 2>&1 || return 1
  if command -v timeout >/dev/null 2>&1; then  # GNU coreutils; macOS has none by default
    timeout 20 docker info >/dev/null 2>&1
  else
    docker info >/dev/null 2>&1
  fi
}

config=${SANDBOX_REPLAY_DOCKERD_CONFIG:-/etc/docker/daemon.json}

# Add crun and runsc (those installed) to $config's "runtimes"; other keys and runtimes kept.
register_runtimes() {
  [ "$(id -u)" = 0 ] || return 0
  command -v python3 >/dev/null 2>&1 || return 0
  mkdir -p "$(dirname "$config")"
  python3 - "$config" <<'PY'
import json, os, shutil, sys
path = sys.argv[1]
try:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
except FileNotFoundError:
    data = {}
wanted = {"crun": {"path": "/usr/bin/crun"},
          "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}
runtimes = data.setdefault("runtimes", {})
changed = False
for name, spec in wanted.items():
    if name not in runtimes and shutil.which(name) == spec["path"]:
        runtimes[name] = spec
        changed = True
if changed:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)
    print(f"ensure-engine: runtimes {sorted(runtimes)} registered in {path}", file=sys.stderr)
PY
}

if engine_ok; then
  register_runtimes || true  # for the engine's next start; the running one is left alone
  exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
  echo "ensure-engine: DOCKER_HOST=$DOCKER_HOST does not answer; not starting a local engine" >&2
  exit 6
fi
case "$(uname -s)" in
  Linux) ;;
  Darwin)
    echo "ensure-engine: no Docker engine answers: start Docker Desktop (or \`colima start\`, OrbStack, \`podman machine start\`), or pick a running one with \`docker context use NAME\`; then retry" >&2
    exit 6 ;;
  *)
    echo "ensure-engine: no Docker engine answers: start Docker Desktop (or Podman Desktop's machine), or pick a running one with \`docker context use NAME\`; then retry" >&2
    exit 6 ;;
esac
if [ "$(id -u)" != 0 ]; then
  echo "ensure-engine: no usable Docker engine, and installing/starting one needs root (start Docker, then retry)" >&2
  exit 6
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 \
  || ! command -v crun >/dev/null 2>&1; then
  echo "ensure-engine: installing docker.io, debootstrap and crun with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io debootstrap crun >/dev/null
  # gVisor where the distribution has it (Debian does; an absent package is no failure)
  apt-get install -y -qq runsc >/dev/null 2>&1 || echo "ensure-engine: runsc not installed" >&2
fi
register_runtimes

echo "ensure-engine: starting dockerd in the background (log: $logfile)" >&2
nohup dockerd >"$logfile" 2>&1 </dev/null &
echo $! >"$pidfile"

deadline=$((SECONDS + wait_s))
until engine_ok; do
  if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "ensure-engine: dockerd exited; last lines of $logfile:" >&2
    tail -n 20 "$logfile" >&2 || true
    exit 6
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "ensure-engine: dockerd did not answer within ${wait_s} s; see $logfile" >&2
    exit 6
  fi
  sleep 1
done
echo "ensure-engine: dockerd is up" >&2
