"""Run one episode: prepare the run folder, start the sandbox, drive the protocol, classify.

Sequence: `runner.episode.prepare.prepare_run` writes the run folder and the `SandboxSpec`;
`run_episode` starts the sandbox, waits for ``hello`` (with a deadline), sends ``start``,
answers ``model_request`` through the provider, collects the other messages, sends
``shutdown`` after ``episode``, reads the exit state before removal and writes the trace
(`runner.trace.writer`); what it learns is kept by `runner.episode.state.EpisodeState`.

Status rules, first match wins:
1. the backend failed (start, attach, engine) or the runtime reported its own ``error`` or a
   protocol mismatch without an episode → ``infra_error``;
2. the host refused a model (or user) turn because a ceiling would be exceeded →
   ``ceiling_reached`` (the failure names that call, error class ``CeilingReached``);
2b. a call line past the policy's ``max_calls``, or one that would make the trace longer than
   ``max_trace_mb``, arrived: the host accepted it no more, killed the sandbox →
   ``limit_exceeded`` (``end.limit: {name, value}``; the failure is the last call kept and
   ``workflow``, error class ``limit_exceeded``; episode exit code 125);
2c. the host killed the sandbox at its *budget* deadline (the submission's sandbox-seconds
   ceiling, shared by a budget clock: `runner.submit.budgetclock`), or a model call ran into
   that deadline → ``ceiling_reached`` (error class ``CeilingReached``, tool ``workflow``);
3. ``State.OOMKilled``, or an OOM kill the runtime counted in its memory cgroup
   (`runner.runtime.oomcount`: the engine's flag can miss a child's) → ``oom``;
4. the host killed the sandbox because its deadline passed, or the model provider ran into
   the deadline, or the sandbox ended itself at or past its deadline without an episode (the
   runtime's watchdog, exit 124, or the lifetime cap, exit 137, the engine's run time at least
   the timeout) → ``timeout``;
5. stdout passed the total-output cap (the host killed the sandbox) → ``failed``, reason says;
   a stdout line that is not a protocol message (any decode failure of the strict decoder,
   `runner.trace.strictjson`: too deep, NaN, duplicate keys, not UTF-8, not JSON; or an unknown
   type) → the host kills the sandbox, ``crashed``, the reason names the line;
6. an ``episode`` message arrived → its status (``succeeded``/``failed``/``denied``), except
   that a non-zero exit after a ``succeeded`` episode is not a success (→ ``crashed``);
7. otherwise (died without an episode, e.g. SIGKILL from inside) → ``crashed`` with the exit
   code and the last 100 stderr lines.
A dead sandbox is never a success; steps never started are ``not_run``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any, Protocol

from runner.backends.base import Backend, ExitState, Sandbox
from runner.domain.ids import IdFactory
from runner.episode.channel import Channel, ChannelEvent
from runner.episode.prepare import RUNTIME_COMMAND, prepare_run
from runner.episode.request import EpisodeRequest, EpisodeResult
from runner.episode.state import EpisodeState
from runner.errors import InfrastructureError
from runner.hostlog import get_logger
from runner.providers.base import ModelProvider
from runner.providers.deadline import DeadlineProvider
from runner.providers.mcphttp import McpForwarder
from runner.providers.ratelimit import WaitAccount
from runner.settings import Settings
from runner.trace.redact import Redactor
from runner.trace.writer import TraceWriter
from runner.wire import protocol

__all__ = ["BudgetDeadline", "lookup_image_id", "run_episode"]

log = get_logger(__name__)

HELLO_TIMEOUT_S = 30.0
SHUTDOWN_GRACE_S = 5.0
KILL_DRAIN_S = 10.0
POLL_S = 0.2
MIN_WRITE_S = 0.5  # a write past the deadline still gets this long (a shutdown, say)


class BudgetDeadline(Protocol):
    """A running sandbox's budget deadline (`runner.submit.budgetclock.BudgetGrant`)."""

    def begin(self) -> None:
        """The sandbox started now."""

    def remaining_s(self) -> float:
        """Seconds until the deadline (it may move either way while the run goes on)."""


def lookup_image_id(backend: Backend, image: str) -> str | None:
    """The image's id for the environment manifest, or None when the backend cannot tell.

    `Backend.image_id`; an engine error leaves the manifest without one (logged), never fails
    the run.
    """
    try:
        value = backend.image_id(image)
    except Exception as exc:  # an unknown image id is a gap in the manifest, not a failure
        log.warning("image_id_unavailable", image=image, error=str(exc))
        return None
    return str(value) if value else None


def trace_redactor(request: EpisodeRequest) -> Redactor | None:
    """The redactor of a ``live`` run's trace (record mode): the policy's rules, a fresh key.

    A live run sees real data, so its trace is redacted as it is written
    (`runner.trace.redact`). Replay and judge runs are written as they come: what they are
    served comes from traces and tasks that were redacted when recorded, imported or packed,
    and a fresh key would make a served placeholder differ from the recording's.
    """
    if request.purpose != "live":
        return None
    return Redactor(getattr(request.policy, "redaction_rules", None))


def run_episode(
    request: EpisodeRequest,
    *,
    backend: Backend,
    settings: Settings,
    provider: ModelProvider | None,
    id_factory: IdFactory,
    monotonic: Callable[[], float] = time.monotonic,
    hello_timeout_s: float = HELLO_TIMEOUT_S,
    command: Sequence[str] = RUNTIME_COMMAND,
    channel_factory: Callable[[], Channel] = Channel,
    waits: WaitAccount | None = None,
    budget: BudgetDeadline | None = None,
) -> EpisodeResult:
    """Run one episode in a sandbox and write its trace.

    Args:
        request: workflow, task, policy, registry, image, mode.
        backend: the sandbox backend.
        settings: host settings (state dir, limit overrides).
        provider: answers model turns; None when the workflow has no model (a request is then
            answered with an error).
        id_factory: makes the run id.
        monotonic: the host's deadline clock (seconds).
        hello_timeout_s: how long the runtime has to say hello.
        command: the sandbox command (the runtime; tests may substitute).
        channel_factory: makes the output decoder (tests use smaller caps).
        waits: the episode's rate-limit waits (the provider's `RateLimitedProvider` charges
            them): the deadline moves by what was waited, and the trace's ``end`` meter says
            how long (``rate_limit_wait_s``).
        budget: the run's budget deadline under a sandbox-seconds ceiling, or None: the
            sandbox is killed when it passes, and the run ends ``ceiling_reached``.

    Returns:
        The result; the trace is written whatever the status.

    Raises:
        InputError: invalid run id.
    """
    prepared = prepare_run(request, settings, id_factory, command=command)
    channel = channel_factory()
    state = EpisodeState(
        request=request,
        prepared=prepared,
        channel=channel,
        image_id=lookup_image_id(backend, request.image),
        backend_name=backend.name,
    )
    limits = prepared.spec.limits
    log.info(
        "episode_starting",
        run_id=prepared.run_id,
        task_id=request.task.task_id,
        image=request.image,
        timeout_s=limits.timeout_s,
        memory_mb=limits.memory_mb,
    )
    # record's messages to the workflow's MCP server URLs (runner.providers.mcphttp)
    mcp = McpForwarder(prepared.run_spec["workflow"], live=request.mode == "record")
    with (
        closing(mcp),
        TraceWriter(
            prepared.trace_path,
            max_bytes=limits.max_trace_mb * 1024 * 1024,
            redactor=trace_redactor(request),
        ) as trace,
    ):
        state.trace = trace
        exit_state: ExitState | None = None
        started = monotonic()
        try:
            with backend.sandbox(prepared.spec) as sandbox:
                started = monotonic()
                if budget is not None:
                    budget.begin()
                state.node = getattr(sandbox, "node", None)  # fakes may lack it
                state.sandbox_name = getattr(sandbox, "name", None)
                _drive(
                    sandbox,
                    state,
                    provider,
                    monotonic,
                    started,
                    limits.timeout_s,
                    min(hello_timeout_s, limits.timeout_s),
                    waits,
                    budget,
                    mcp,
                )
                exit_state = sandbox.wait(SHUTDOWN_GRACE_S)
        except InfrastructureError as exc:
            log.warning("episode_infrastructure_error", run_id=prepared.run_id, error=str(exc))
            if exit_state is None:
                state.infra_error = str(exc)
            else:  # the episode ended and its exit state was read: only the removal failed
                state.teardown_error = str(exc)
        except KeyboardInterrupt:
            # The backend's context has killed and removed the sandbox; the trace still ends.
            state.infra_error = "interrupted (Ctrl-C): the host stopped the sandbox"
            state.sandbox_s = monotonic() - started
            state.rate_limit_wait_s = waits.waited_s if waits is not None else 0.0
            state.finish(exit_state)
            raise
        state.sandbox_s = monotonic() - started
        state.rate_limit_wait_s = waits.waited_s if waits is not None else 0.0
        result = state.finish(exit_state)
    log.info(
        "episode_finished", run_id=result.run_id, status=result.status, trace=str(result.trace_path)
    )
    return result


def _drive(
    sandbox: Sandbox,
    state: EpisodeState,
    provider: ModelProvider | None,
    monotonic: Callable[[], float],
    started: float,
    timeout_s: float,
    hello_timeout_s: float,
    waits: WaitAccount | None = None,
    budget: BudgetDeadline | None = None,
    mcp: McpForwarder | None = None,
) -> None:
    """Pump frames until end of output, answering the runtime; kill on a passed deadline.

    An ``mcp_request`` (``record``'s message to an MCP server URL) is answered by ``mcp``.

    The deadline is ``timeout_s`` after start plus what the run waited on rate limits, or the
    budget deadline when that comes first.
    """

    def deadline() -> float:
        return started + timeout_s + (waits.waited_s if waits is not None else 0.0)

    def budget_passed() -> bool:
        return budget is not None and budget.remaining_s() <= 0

    def remaining_s() -> float:
        left = deadline() - monotonic()
        return left if budget is None else min(left, budget.remaining_s())

    if provider is not None:

        def provider_timed_out() -> None:
            if budget_passed() and deadline() > monotonic():
                state.budget_cut = True
            else:
                state.provider_timed_out = True

        provider = DeadlineProvider(provider, remaining_s, provider_timed_out)
    hello_deadline = started + hello_timeout_s
    shutdown_deadline: float | None = None
    killed_at: float | None = None
    for frame in sandbox.frames(POLL_S):
        if frame is not None:
            for event in state.channel.feed(*frame):
                if mcp is not None and _is_mcp_request(event):
                    if not (state.killed_for or state.wants_kill):
                        answer = mcp.reply(event.message or {}, remaining_s())
                        _send(sandbox, state, answer, remaining_s())
                    continue
                reply = state.on_event(event, provider)
                for message in reply:
                    _send(sandbox, state, message, remaining_s())
        now = monotonic()
        if state.shutdown_sent and shutdown_deadline is None:
            shutdown_deadline = now + SHUTDOWN_GRACE_S
        if state.killed_for:
            killed_at = now if killed_at is None else killed_at
            if now - killed_at > KILL_DRAIN_S:  # output never ended after SIGKILL: stop reading
                log.warning("output_not_closed_after_kill", run_id=state.prepared.run_id)
                break
            continue
        if state.wants_kill:
            _kill(sandbox, state, state.wants_kill)
        elif budget_passed() and now <= deadline():
            state.budget_cut = True
            _kill(sandbox, state, "budget")
        elif now > deadline():
            _kill(sandbox, state, "timeout")
        elif state.hello is None and now > hello_deadline:
            _kill(sandbox, state, "no_hello")
        elif shutdown_deadline is not None and now > shutdown_deadline:
            _kill(sandbox, state, "shutdown_grace")
    for event in state.channel.close():
        state.on_event(event, provider)


def _is_mcp_request(event: ChannelEvent) -> bool:
    return event.kind == "message" and (event.message or {}).get("type") == "mcp_request"


def _send(sandbox: Sandbox, state: EpisodeState, message: dict[str, Any], left_s: float) -> None:
    """Write ``message``; a sandbox that does not take it within ``left_s`` s is killed."""
    if state.killed_for:  # a killed sandbox reads nothing more
        return
    try:
        sandbox.write(protocol.encode(message), timeout_s=max(left_s, MIN_WRITE_S))
    except InfrastructureError as exc:
        # The sandbox may have died: the exit state decides the status, not this write.
        state.write_failed = str(exc)
        log.info("channel_write_failed", run_id=state.prepared.run_id, error=str(exc))
        if isinstance(exc.__cause__, TimeoutError) and not state.killed_for:
            _kill(sandbox, state, "timeout")  # it stopped reading until the deadline passed
    else:
        if message["type"] == "shutdown":
            state.shutdown_sent = True


def _kill(sandbox: Sandbox, state: EpisodeState, reason: str) -> None:
    log.info("sandbox_kill", run_id=state.prepared.run_id, reason=reason)
    state.killed_for = reason
    sandbox.kill()
