"""One episode's summary as ``run`` and ``record`` print it (the JSON is `EpisodeResult.summary`).

Error messages, destinations and stderr come from sandboxed code: every field goes through
`runner.cli.render.terminal.echo`, which makes it inert.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from runner.cli.render.terminal import echo, one_line, say
from runner.domain.words import counted

if TYPE_CHECKING:
    from runner.episode.request import EpisodeResult
    from runner.errors import SandboxReplayError

__all__ = ["divergence_lines", "print_episode", "warn_skipped_line"]

DIVERGENCES_SHOWN = 3
"""Divergences an episode summary names; the trace holds them all."""


def warn_skipped_line(error: SandboxReplayError) -> None:
    """Print a rejected task line on stderr (file and line named); the others still run."""
    echo(f"warning: {error} (line skipped)", err=True)


def print_episode(result: EpisodeResult, *, sandboxed: bool = True) -> None:
    """Print an episode's summary and its trace path (every field from the sandbox inert).

    Args:
        result: the episode (its ``end`` line is read by key: it is the trace's own record).
        sandboxed: False for ``record``: the meter's seconds are wall seconds, no sandbox.
    """
    # Error messages, destinations and stderr come from sandboxed code: printed inert.
    end = result.end
    say(f"run {result.run_id}: {result.status} (episode exit code {end.get('exit_code')})")
    if end.get("reason"):
        say(f"  reason: {one_line(end['reason'])}")
    if end.get("error"):
        error = end["error"]
        say(f"  error: {one_line(error.get('class'))}: {one_line(error.get('message'))}")
    if end.get("failure"):
        failure = end["failure"]
        say(
            f"  failure: call {failure['call_index']} {failure['tool']} {failure['error_class']}"
            f" (signature {str(end.get('failure_signature'))[:16]})"
        )
    for line in divergence_lines(end):
        say(f"  {one_line(line)}")  # a message from the sandbox: one line, whatever it holds
    if end.get("output") is not None:
        text = json.dumps(end["output"], ensure_ascii=False)  # echo makes it inert
        say(f"  output: {text if len(text) <= 300 else text[:297] + '...'}")
    if end.get("not_run"):
        say(f"  not run: {', '.join(end['not_run'])}")
    outbound = end.get("outbound") or []
    dropped = end.get("outbound_dropped") or 0
    say(
        f"  outbound destinations: {len(outbound)} (log coverage {end.get('coverage')}"
        + (f"; {counted(dropped, 'attempt')} past the log's cap not logged" if dropped else "")
        + ")"
    )
    for attempt in outbound[:20]:
        count = attempt.get("count") or 1
        say(
            f"    {attempt.get('kind')} {attempt.get('host') or attempt.get('address')}"
            f":{attempt.get('port')} ({attempt.get('outcome')}"
            + (f", {count} attempts" if count != 1 else "")
            + ")"
        )
    for detail in (end.get("coverage_detail") or [])[:5]:
        what = detail.get("program") or detail.get("library") or ""
        label = "clock" if detail.get("partial") is False else "partial"  # clock-only note
        say(f"    {label}: {detail.get('reason')} {what}")
    meter = end.get("meter") or {}
    say(
        f"  meter: {meter.get('tokens_in', 0)} tokens in, {meter.get('tokens_out', 0)} out, "
        f"{meter.get('sandbox_s', 0)} {'sandbox-s' if sandboxed else 'wall s (no sandbox)'}"
    )
    if result.status in ("crashed", "infra_error") and end.get("stderr_tail"):
        say("  last stderr lines:")
        for line in end["stderr_tail"][-10:]:
            say(f"    {line}")
    say(f"trace: {result.trace_path}")


def divergence_lines(end: dict[str, object]) -> list[str]:
    """What the episode's divergences say, one line each: the cause under a failure.

    A call the run could not serve (no observation, no recorded call, a denied tool) is
    answered to the program with an error; an agent framework then often ends with an error
    of its own that names nothing (``ExceptionGroup: unhandled errors in a TaskGroup``: a new
    user's finding), so the summary names the divergence that came first. At most
    `DIVERGENCES_SHOWN`, then how many more.

    Args:
        end: the trace's end line (``divergences``: ``{kind, index, tool, message}`` each).
    """
    found = end.get("divergences")
    items = [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []
    lines = [
        f"divergence ({d.get('kind')}): call {d.get('index')} {d.get('tool')}: {d.get('message')}"
        for d in items[:DIVERGENCES_SHOWN]
    ]
    dropped = end.get("divergences_dropped")
    more = len(items) - DIVERGENCES_SHOWN + (dropped if isinstance(dropped, int) else 0)
    if more > 0:
        lines.append(f"... and {counted(more, 'more divergence')} in the trace")
    return lines
