"""The trace lines the host writes for one episode: the header and the ``end`` line.

Both are built from what the host learned (`runner.episode.state.EpisodeState`, read through
`EpisodeFacts`): the header when the runtime says ``hello`` (or at the end, when it never did),
from the prepared run and the runtime's own report of its environment; the ``end`` line from the
status (`runner.episode.status`), the meter, the outbound log, the coverage and the channel's
counters. What the sandbox reported is kept only in the fields made for it, bounded by the
state's caps.
"""

from __future__ import annotations

import platform as host_platform
from typing import TYPE_CHECKING, Any, Protocol

from runner.backends.base import ExitState
from runner.episode.status import StatusFacts, failure_of, runtime_oom_kills
from runner.tools.snapshot.sources import snapshot_agent_code
from runner.trace.format import episode_exit_code, failure_signature

if TYPE_CHECKING:
    from runner.episode.channel import Channel
    from runner.episode.outbound import OutboundLog
    from runner.episode.request import EpisodeRequest
    from runner.trace.writer import TraceWriter

__all__ = ["MAX_COVERAGE", "EpisodeFacts", "coverage_of", "end_line", "write_header"]

MAX_COVERAGE = 100


class EpisodeFacts(StatusFacts, Protocol):
    """What the header and the ``end`` line read of an episode's state (beyond the status)."""

    request: EpisodeRequest
    channel: Channel
    image_id: str | None
    backend_name: str
    node: str | None
    sandbox_name: str | None
    trace: TraceWriter | None
    teardown_error: str | None
    calls_refused: int
    steps: dict[str, str]
    outbound: OutboundLog
    coverage: list[dict[str, Any]]
    coverage_dropped: int
    divergences: list[dict[str, Any]]
    divergences_dropped: int
    nondeterminism: dict[str, Any] | None
    tokens_in: int
    tokens_out: int
    model_calls: int
    usd: float
    rate_limit_wait_s: float
    unpriced_models: list[str]
    channel_events: list[dict[str, Any]]

    @property
    def gateway_notes(self) -> list[dict[str, Any]]:
        """The gateway's notes kept (`runner.episode.gatewayturns`)."""

    @property
    def gateway_notes_dropped(self) -> int:
        """The gateway's notes past the kept ones."""


def write_header(state: EpisodeFacts) -> None:
    """Write the trace's header line once (nothing when it is written or there is no trace)."""
    trace = state.trace
    if trace is None or trace.header_written:
        return
    request, run_spec = state.request, state.prepared.run_spec
    hello = state.hello or {}
    manifest = state.prepared.manifest
    policy = manifest.get("policy", {})
    wf = request.workflow
    spec = wf.spec
    limits = state.prepared.spec.limits
    trace.header(
        run_id=state.prepared.run_id,
        task_id=request.task.task_id,
        task_input=dict(request.task.input),
        workflow={
            "name": spec.name,
            "version": spec.version,
            "hash": wf.content_hash,
            "content": wf.source,
        },
        purpose=request.purpose,
        backend=state.backend_name,
        **({"node": state.node} if state.node is not None else {}),
        **({"sandbox": state.sandbox_name} if state.sandbox_name else {}),
        clock=run_spec["clock"],
        seed=run_spec["seed"],
        environment={
            "python": hello.get("python"),
            "platform": hello.get("platform"),
            "packages": hello.get("packages", {}),
            "image": request.image,
            "image_id": state.image_id,
            "tools": {t["id"]: t.get("schema_hash") for t in manifest.get("tools", [])},
            "policy_hash": policy.get("hash"),
            "host": {"python": host_platform.python_version()},
            **({"tool_snapshot": request.snapshot.digest} if request.snapshot is not None else {}),
            **_agent_code(request),
        },
        mode=request.mode,
        policy=policy,
        limits={
            "memory_mb": limits.memory_mb,
            "pids_limit": limits.pids_limit,
            "cpus": limits.cpus,
            "tmpfs_mb": limits.tmpfs_mb,
            "timeout_s": limits.timeout_s,
            "max_calls": limits.max_calls,
            "max_trace_mb": limits.max_trace_mb,
            "hard_cap_s": state.prepared.spec.hard_cap.whole_s,
        },
    )


def _agent_code(request: Any) -> dict[str, Any]:
    """``{"agent_code": {...}}`` of the run's program steps, from its snapshot (or nothing)."""
    modules = [
        step.program.partition(":")[0]
        for step in request.workflow.spec.steps
        if step.program is not None
    ]
    if not modules or request.snapshot is None:
        return {}
    hashes = snapshot_agent_code(request.snapshot, modules)
    return {"agent_code": hashes} if hashes else {}


def coverage_of(state: EpisodeFacts) -> str:
    """``partial`` or ``full``: whether the outbound log may miss an attempt.

    A coverage note with ``partial: false`` is clock-only information (a child or foreign code
    that reads the machine's clock, its network calls seen by the egress witness:
    `runner.runtime.egress.audit`); any other note, a dropped note or the outbound log's cap
    makes it ``partial``.
    """
    notes = any(note.get("partial") is not False for note in state.coverage)
    return "partial" if notes or state.coverage_dropped or state.outbound.partial else "full"


def end_line(
    state: EpisodeFacts, exit_state: ExitState | None, status: str, reason: str | None
) -> dict[str, Any]:
    """The ``end`` record of an episode whose ``(status, reason)`` is classified.

    Args:
        state: what the host learned.
        exit_state: the sandbox's exit state (None when it was never read).
        status: one of `runner.trace.format.STATUSES` (`runner.episode.status.classify`).
        reason: why, in words (None for a runtime-reported status without one).

    Returns:
        The JSON-able ``end`` record (schema: `runner.trace.format`).
    """
    episode = state.episode or {}
    exit_code = episode_exit_code(status)
    failure: dict[str, Any] | None = None
    signature: str | None = None
    if status != "succeeded":
        failure = failure_of(state, status, episode)
        failure["exit_code"] = exit_code
        signature = failure_signature(
            failure["call_index"], failure["tool"], failure["error_class"], exit_code
        )
    step_ids = [s["id"] for s in state.prepared.run_spec["workflow"].get("steps", [])]
    not_run = episode.get("not_run") if state.episode is not None else None
    if not isinstance(not_run, list):
        not_run = [s for s in step_ids if s not in state.steps]
    end: dict[str, Any] = {
        "status": status,
        "exit_code": exit_code,
        "failure": failure,
        "failure_signature": signature,
        "output": episode.get("output"),
        "error": episode.get("error") or state.runtime_error,
        "reason": reason,
        "not_run": not_run,
        "outbound": state.outbound.entries,
        "outbound_dropped": state.outbound.dropped,
        "coverage": coverage_of(state),
        "coverage_detail": [
            *filter(None, [state.outbound.coverage_reason()]),
            *state.coverage,
        ],
        "divergences": state.divergences,
        "divergences_dropped": state.divergences_dropped,
        **(
            {
                "undeclared_tools": [
                    {"step_id": step_id, "name": name, "requests": count}
                    for (step_id, name), count in sorted(state.undeclared_tools.items())
                ]
            }
            if state.undeclared_tools
            else {}
        ),
        "meter": {
            "tokens_in": state.tokens_in,
            "tokens_out": state.tokens_out,
            "model_calls": state.model_calls,
            "usd": round(state.usd, 6),
            "sandbox_s": round(state.sandbox_s, 3),
            "rate_limit_wait_s": round(state.rate_limit_wait_s, 3),
        },
        "sandbox": None
        if exit_state is None
        else {
            "exit_code": exit_state.exit_code,
            "oom_killed": exit_state.oom_killed,
            "oom_kills": runtime_oom_kills(state.episode),
            "killed_by_host": exit_state.killed_by_host,
            "killed_for": state.killed_for,
            "ran_s": None if exit_state.ran_s is None else round(exit_state.ran_s, 3),
            "error": exit_state.error,
            "teardown_error": state.teardown_error,
        },
        "channel": {
            "stdout_bytes": state.channel.stdout_bytes,
            "stderr_bytes": state.channel.stderr_bytes,
            "too_large": state.channel.too_large[:MAX_COVERAGE],
            "invalid_lines": state.channel.invalid,
            "truncated": state.channel.truncated,
            "dropped_bytes": state.channel.dropped_bytes,
            "events": state.channel_events,
        },
    }
    if state.nondeterminism is not None:  # reproduce: what the user's code read, unpinned
        end["nondeterminism"] = state.nondeterminism
    if state.limit is not None:
        end["limit"] = dict(state.limit)
        end["channel"]["calls_refused"] = state.calls_refused
    meta: dict[str, Any] = {}
    if state.unpriced_models:  # the meter is a closed record: say here what it could not price
        meta["unpriced_models"] = state.unpriced_models
    if state.gateway_notes or state.gateway_notes_dropped:  # answered in the sandbox itself
        meta["gateway"] = {
            "answered_in_sandbox": state.gateway_notes,
            "dropped": state.gateway_notes_dropped,
        }
    if meta:
        end["meta"] = meta
    if status != "succeeded":
        end["stderr_tail"] = state.channel.stderr_tail()
    return end
