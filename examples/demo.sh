#!/usr/bin/env bash
# The sandbox-replay demo (run by `make demo` after set-up): the three jobs on the help-desk
# example of examples/helpdesk, in order:
#   1. check   v3 calls an unsafe tool: ineligible, exit 3, the tool named;
#   2. submit  v1 against v2 over the 22 tasks, with a ceiling: plan, progress bar, tournament,
#              per task the rubric's scores and reasons (all in submit's own report);
#   3. reproduce the recorded failing run (reproduced, exit 0) and the incomplete trace
#      (not_reproduced, exit 1: the missing call and the outbound destinations).
# Expected non-zero exits are shown and the demo goes on; any other exit code fails it.
# State (ledger, traces, job folders) goes to a fresh temporary folder unless
# SANDBOX_REPLAY_STATE_DIR is set.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
sr=${SANDBOX_REPLAY:-$root/.venv/bin/sandbox-replay}
if [ -z "${SANDBOX_REPLAY_STATE_DIR:-}" ]; then
  SANDBOX_REPLAY_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sandbox-replay-demo.XXXXXX")
  export SANDBOX_REPLAY_STATE_DIR
fi
export SANDBOX_REPLAY_LOG_LEVEL=${SANDBOX_REPLAY_LOG_LEVEL:-warning}
cd "$here/helpdesk" || exit 2
started=$(date +%s.%N)

# Bold and dim only on a terminal: a log file gets plain text, not raw escape sequences.
if [ -t 1 ]; then
  bold=$'\033[1m' dim=$'\033[2m' plain=$'\033[0m'
else
  bold='' dim='' plain=''
fi

step() {
  printf '\n%s==> %s%s\n' "$bold" "$1" "$plain"
  printf '$ %s\n' "$2"
}

# expect CODE COMMAND...: run it, show its exit code, stop the demo when it is not CODE.
expect() {
  local want=$1
  shift
  "$@"
  local got=$?
  if [ "$got" -eq "$want" ]; then
    printf '%s[exit %s, as expected]%s\n' "$dim" "$got" "$plain"
  else
    printf 'demo: "%s" exited %s, expected %s\n' "$*" "$got" "$want" >&2
    exit 1
  fi
}

step "1. check: v3 closes the ticket itself (ticket.close is unsafe), so it cannot be sandboxed" \
  "sandbox-replay check v3.yaml"
expect 3 "$sr" check v3.yaml

step "2. submit: v1 against v2 over the recorded tasks, in sandboxes, with a 50-run ceiling" \
  "sandbox-replay submit --variant v1.yaml --variant v2.yaml --tasks tasks.jsonl --ceiling-runs 50"
expect 0 "$sr" submit --variant v1.yaml --variant v2.yaml --tasks tasks.jsonl --ceiling-runs 50

# Why v2 wins is in submit's report: per task, each variant's score and the rubric's reasons.

step "3a. reproduce the recorded failing run: the failure comes back from the trace alone" \
  "sandbox-replay reproduce traces/failing.jsonl"
expect 0 "$sr" reproduce traces/failing.jsonl

step "3b. reproduce a trace missing one tool response: what is missing, and where it would go" \
  "sandbox-replay reproduce traces/incomplete.jsonl"
expect 1 "$sr" reproduce traces/incomplete.jsonl

ended=$(date +%s.%N)
awk -v a="$started" -v b="$ended" -v s="$SANDBOX_REPLAY_STATE_DIR" \
  'BEGIN { printf "\ndemo finished in %.1f s (state in %s)\n", b - a, s }'
job=$(ls -t "$SANDBOX_REPLAY_STATE_DIR/jobs" 2>/dev/null | head -n 1 || true)
if [ -n "$job" ]; then
  echo "the demo's job, as a page: $SANDBOX_REPLAY_STATE_DIR/jobs/$job/report.html"
  echo "              or served: SANDBOX_REPLAY_STATE_DIR=$SANDBOX_REPLAY_STATE_DIR $sr view $job"
fi
