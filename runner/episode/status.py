"""The status of an ended episode and the failure its ``end`` line names.

Pure functions over what the host learned of an episode (`StatusFacts`, the part of
`runner.episode.state.EpisodeState` they read); the rules, first match
wins, are listed in `runner.episode.driver`'s docstring. Invariant: ``ceiling_reached``
comes only from what the host itself did (a model or user turn its metering refused, or its
kill at the run's budget deadline), never from what the sandbox reports.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from runner.backends.base import ExitState
from runner.episode.request import PreparedRun
from runner.providers.metered import CEILING_ERROR_CLASS

__all__ = ["RUNTIME_STATUSES", "StatusFacts", "classify", "failure_of"]

RUNTIME_STATUSES = ("succeeded", "failed", "denied")
# How a sandbox that ended itself at its deadline exits: the runtime's watchdog
# (runner/runtime/watchdog.py EXIT_DEADLINE) and the lifetime cap (``timeout -s KILL``).
EXIT_WATCHDOG = 124
EXIT_CAP = 137


class StatusFacts(Protocol):
    """What the status rules read of an episode's state (`runner.episode.state.EpisodeState`)."""

    prepared: PreparedRun
    hello: dict[str, Any] | None
    episode: dict[str, Any] | None
    runtime_error: dict[str, Any] | None
    protocol_error: str | None
    invalid_message: str | None
    infra_error: str | None
    killed_for: str | None
    provider_timed_out: bool
    budget_cut: bool
    limit: dict[str, Any] | None
    last_call_index: int
    ceiling_refusals: list[dict[str, Any]]
    sandbox_s: float

    @property
    def undeclared_tools(self) -> dict[tuple[str, str], int]:
        """``(step_id, tool name) -> requests`` offering it (`runner.episode.gatewayturns`)."""


def _ended_itself_at_deadline(state: StatusFacts, exit_state: ExitState) -> str | None:
    """Why the sandbox's own deadline ended it, or None when it did not.

    True only for a sandbox that sent no episode, was not killed by the host, exited the way
    the watchdog or the cap exit, and ran (engine clock; else the host's) at least the run's
    timeout: a tool that exits 124 or is SIGKILLed early stays ``crashed``.
    """
    if state.episode is not None or exit_state.killed_by_host:
        return None
    if exit_state.exit_code not in (EXIT_WATCHDOG, EXIT_CAP):
        return None
    limits = state.prepared.spec.limits
    ran_s = exit_state.ran_s if exit_state.ran_s is not None else state.sandbox_s
    if ran_s < limits.timeout_s:
        return None
    if exit_state.exit_code == EXIT_WATCHDOG:
        return (
            f"the runtime's watchdog ended the run past its {limits.timeout_s:g} s deadline"
            f" after {ran_s:.1f} s (the host did not kill it)"
        )
    return (
        f"the sandbox's lifetime cap ({state.prepared.spec.hard_cap.whole_s} s) killed it"
        f" after {ran_s:.1f} s (the host did not kill it)"
    )


def with_runtime_oom(
    episode: dict[str, Any] | None, exit_state: ExitState | None
) -> ExitState | None:
    """``exit_state`` with ``oom_killed`` set when the runtime counted an OOM kill in its group.

    The engine's ``State.OOMKilled`` can miss a child's OOM kill (its event may come after the
    exit the host inspects); the runtime's episode ``oom_kills`` (`runner.runtime.oomcount`,
    the kernel's own counter) fills the gap. A sandbox can only claim it for itself: the claim
    turns its run into ``oom``, a failure, never a success.
    """
    if exit_state is None or exit_state.oom_killed:
        return exit_state
    kills = runtime_oom_kills(episode)
    return replace(exit_state, oom_killed=True) if kills else exit_state


def runtime_oom_kills(episode: dict[str, Any] | None) -> int | None:
    """The episode's ``oom_kills`` when it is a count (0 or more), else None (absent, bad)."""
    kills = (episode or {}).get("oom_kills")
    if isinstance(kills, int) and not isinstance(kills, bool) and 0 <= kills < 1 << 31:
        return kills
    return None


def classify(state: StatusFacts, exit_state: ExitState | None) -> tuple[str, str | None]:
    """Return ``(status, reason)`` of an ended episode (rules: `runner.episode.driver`)."""
    episode = state.episode or {}
    if state.infra_error is not None:
        return "infra_error", state.infra_error
    if exit_state is None:
        return "infra_error", "no exit state"
    if state.ceiling_refusals:  # the host refused a turn: the run is not a full evaluation
        first = state.ceiling_refusals[0]
        return "ceiling_reached", (
            f"{first['tool']} call {first['call_index']} refused: {first['message']}"
        )
    if state.budget_cut and episode.get("status") != "succeeded":  # the budget deadline cut it
        return "ceiling_reached", (
            f"the sandbox-seconds ceiling: the host killed the sandbox at its budget deadline"
            f" after {state.sandbox_s:.1f} s (its share of what was left of the ceiling)"
        )
    if state.limit is not None:  # the host cut the run at a policy limit it witnessed
        name, value = state.limit["name"], state.limit["value"]
        what = f"{value} call lines" if name == "max_calls" else f"{value} MiB of trace"
        return "limit_exceeded", (
            f"limits.{name}: the episode reached {what}; the host accepted no further call"
            " and killed the sandbox"
        )
    if state.undeclared_tools:  # the host refused a request offering undeclared tools
        (step_id, name), *_ = sorted(state.undeclared_tools)
        return "denied", (
            f"step {step_id!r} offered its model the tool {name!r}, which it does not declare:"
            " unsafe (fail closed); the host refused the request"
        )
    if exit_state.oom_killed:
        return "oom", (
            "the sandbox hit its memory limit: the kernel's OOM killer ended a process"
            " (State.OOMKilled or the sandbox's memory cgroup counter)"
        )
    if state.provider_timed_out or (state.killed_for == "timeout" and exit_state.killed_by_host):
        return "timeout", f"killed by the host after {state.prepared.spec.limits.timeout_s} s"
    self_ended = _ended_itself_at_deadline(state, exit_state)
    if self_ended is not None:
        return "timeout", self_ended
    if state.killed_for == "output_limit":
        return "failed", "output passed the total-output cap; the host killed the sandbox"
    if state.invalid_message is not None:  # the sandbox's fault, not the infrastructure's
        return "crashed", (
            f"protocol error: {state.invalid_message} is not a protocol message; the host "
            "killed the sandbox"
        )
    if state.episode is None:
        if state.runtime_error is not None:
            return "infra_error", "runtime error: {class}: {message}".format(**state.runtime_error)
        if state.protocol_error is not None:
            return "infra_error", f"protocol error: {state.protocol_error}"
        if state.hello is None and state.killed_for == "no_hello":
            return "infra_error", "the runtime never said hello"
        return (
            "crashed",
            f"the sandbox exited with code {exit_state.exit_code} without an episode message",
        )
    status = episode.get("status")
    if status not in RUNTIME_STATUSES:
        return "crashed", f"the runtime reported an unknown status {status!r}"
    if (
        status == "succeeded"
        and exit_state.exit_code not in (0, 143)
        and state.killed_for not in ("shutdown_grace", "budget")
    ):
        return "crashed", f"exit code {exit_state.exit_code} after a succeeded episode"
    return str(status), None


def failure_of(state: StatusFacts, status: str, episode: dict[str, Any]) -> dict[str, Any]:
    """The ``failure`` of the ``end`` line (without ``exit_code``) for a non-success."""
    if status == "ceiling_reached" and not state.ceiling_refusals:  # the budget deadline
        return {
            "call_index": state.last_call_index,
            "tool": "workflow",
            "error_class": CEILING_ERROR_CLASS,
        }
    if status == "ceiling_reached":
        first = state.ceiling_refusals[0]
        return {
            "call_index": first["call_index"],
            "tool": first["tool"],
            "error_class": CEILING_ERROR_CLASS,
        }
    if status == "denied" and state.undeclared_tools:
        (_, name), *_ = sorted(state.undeclared_tools)
        return {
            "call_index": state.last_call_index,
            "tool": name,
            "error_class": "runner.errors.CapabilityDenied",
        }
    reported = episode.get("failure") if status in RUNTIME_STATUSES else None
    if isinstance(reported, dict) and isinstance(reported.get("call_index"), int):
        return {
            "call_index": reported["call_index"],
            "tool": str(reported.get("tool", "workflow")),
            "error_class": str(reported.get("error_class", status)),
        }
    error = episode.get("error") if status in RUNTIME_STATUSES else None
    error_class = error.get("class") if isinstance(error, dict) else None
    return {
        "call_index": state.last_call_index,
        "tool": "workflow",
        "error_class": str(error_class or status),
    }
