"""Run one episode: prepare the run folder, start the sandbox, drive the protocol, classify.

Sequence: `prepare_run` writes ``<state>/runs/<run_id>/{manifest.json,run.json}`` and builds the
`SandboxSpec` (the sandbox side of runner (`runner_mounts`), the run folder and the command's
tool snapshot mounted read-only: no user folder is mounted live, `runner.episode.snapshot`;
fixed env; limits from the policy overridden by settings; the hard lifetime cap `LifetimeCap`
from the run timeout, and the same timeout as ``run.json`` ``deadline_s`` for the runtime's
watchdog). `run_episode` starts the sandbox, waits for ``hello`` (with a deadline), sends
``start``, answers ``model_request`` through the provider, collects the other messages, sends
``shutdown`` after ``episode``, reads the exit state before removal and writes the trace
(`runner.trace.writer`).

Status rules (issue 4), first match wins:
1. the backend failed (start, attach, engine) or the runtime reported its own ``error`` or a
   protocol mismatch without an episode → ``infra_error``;
2. the host refused a model (or user) turn because a ceiling would be exceeded →
   ``ceiling_reached`` (the failure names that call, error class ``CeilingReached``);
2b. a call line past the policy's ``max_calls``, or one that would make the trace longer than
   ``max_trace_mb``, arrived: the host accepted it no more, killed the sandbox →
   ``limit_exceeded`` (``end.limit: {name, value}``; the failure is the last call kept and
   ``workflow``, error class ``limit_exceeded``; episode exit code 125);
3. ``State.OOMKilled`` → ``oom`` (any process of the sandbox hit the memory limit);
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

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from runner import resources
from runner.backends.base import (
    Backend,
    ExitState,
    LifetimeCap,
    Mount,
    Sandbox,
    SandboxSpec,
    sandbox_user,
)
from runner.backends.labels import LEDGER, LEDGER_KEY
from runner.domain.ids import IdFactory, new_run_id, path_for_id
from runner.domain.tasks import Task
from runner.episode.channel import Channel
from runner.episode.limits import resource_limits
from runner.episode.reaping import ledger_id
from runner.episode.snapshot import ToolSnapshot
from runner.episode.snapshot_sources import tool_mounts
from runner.episode.state import EpisodeState
from runner.errors import InfrastructureError
from runner.providers.base import ModelProvider
from runner.providers.deadline import DeadlineProvider
from runner.runtime import protocol
from runner.settings import Settings
from runner.trace.writer import TraceWriter

log = structlog.get_logger(__name__)

RUNTIME_COMMAND = ("python3", "-u", "-m", "runner.runtime")
DEFAULT_CLOCK_START = 1767225600.0  # 2026-01-01T00:00:00Z: a fixed start when none is recorded
CLOCK_STEP_S = 1.0
SEED = 0
HELLO_TIMEOUT_S = 30.0
SHUTDOWN_GRACE_S = 5.0
KILL_DRAIN_S = 10.0
POLL_S = 0.2
MIN_WRITE_S = 0.5  # a write past the deadline still gets this long (a shutdown, say)


@dataclass(frozen=True)
class EpisodeRequest:
    """What to run.

    Attributes:
        workflow: a loaded workflow file (`runner.domain.workflow.WorkflowFile`).
        task: the task.
        policy: the loaded policy (`runner.policy.Policy`).
        registry: the workflow's registry (`runner.domain.registry.Registry`); the manifest
            mounted into the sandbox is ``registry.manifest(policy)``.
        image: the sandbox image.
        mode: ``shadow`` or ``reproduce``.
        purpose: the trace's purpose (``replay`` for sandboxed runs).
        recorded_calls: reproduce: the trace's call records; else empty.
        clock_start: overrides the task's ``clock_start`` (reproduce: the trace's).
        ledger_key: the ledger run this episode is charged to (`runner.ledger.run_key`), put
            on the sandbox as a label so that the reaper can settle it after a crash.
        snapshot: the command's tool snapshot, mounted in place of the tool folders (required
            whenever the run has tool folders, except in ``record`` mode, which runs the
            project's own files live and unsandboxed on purpose).
    """

    workflow: Any
    task: Task
    policy: Any
    registry: Any
    image: str
    mode: str = "shadow"
    purpose: str = "replay"
    recorded_calls: Sequence[Mapping[str, Any]] = ()
    clock_start: float | None = None
    ledger_key: str | None = None
    snapshot: ToolSnapshot | None = None


@dataclass
class PreparedRun:
    """A run folder written to disk and the spec to start its sandbox.

    Attributes:
        run_id: the run id.
        run_dir: ``<state>/runs/<run_id>`` (mounted at ``/sandbox/run``).
        trace_path: ``<state>/traces/<run_id>.jsonl``.
        spec: the sandbox spec.
        manifest: the manifest written.
        run_spec: the ``run.json`` written.
    """

    run_id: str
    run_dir: Path
    trace_path: Path
    spec: SandboxSpec
    manifest: dict[str, Any]
    run_spec: dict[str, Any]


@dataclass
class EpisodeResult:
    """How an episode ended (also the content of the trace's ``end`` line).

    Attributes:
        run_id: the run id.
        status: one of `runner.trace.format.STATUSES`.
        trace_path: the written trace.
        end: the trace's ``end`` record.
        infrastructure_failed: True when the status is ``infra_error`` (CLI exit 6).
    """

    run_id: str
    status: str
    trace_path: Path
    end: dict[str, Any] = field(default_factory=dict)

    @property
    def infrastructure_failed(self) -> bool:
        """True when infrastructure, not the workflow, ended the run."""
        return self.status == "infra_error"

    def summary(self) -> dict[str, Any]:
        """Return a JSON-able summary: run id, status, trace path and the ``end`` fields."""
        return {"run_id": self.run_id, "trace": str(self.trace_path), **self.end}


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=True, indent=1) + "\n", encoding="ascii")
    path.chmod(0o644)


def _modules(manifest: Mapping[str, Any]) -> list[str]:
    seen: dict[str, None] = {}
    for entry in manifest.get("tools", []):
        module = entry.get("module")
        if module and entry.get("disposition", "execute") == "execute":
            seen.setdefault(module, None)
    return list(seen)


def runner_mounts(package: Path | None = None) -> list[Mount]:
    """Read-only mounts of the sandbox side of ``runner``: its ``__init__.py`` and packages.

    Only `runner.runtime.protocol.SANDBOX_PACKAGES` (standard library only) go into a
    sandbox, under ``RUNTIME_ROOT/runner``; the host side (CLI, ledger, this driver) does not.

    Args:
        package: the installed ``runner`` folder (default `runner.resources.package_dir`).
    """
    package = package or resources.package_dir()
    target = f"{protocol.RUNTIME_ROOT}/runner"
    mounts = [Mount(package / "__init__.py", f"{target}/__init__.py")]
    mounts += [Mount(package / name, f"{target}/{name}") for name in protocol.SANDBOX_PACKAGES]
    return mounts


def prepare_run(
    request: EpisodeRequest,
    settings: Settings,
    id_factory: IdFactory,
    *,
    command: Sequence[str] = RUNTIME_COMMAND,
    pool_lifetime_s: float = 0.0,
    rate_limit_wait_s: float = 0.0,
) -> PreparedRun:
    """Create the run folder (manifest.json, run.json) and the sandbox spec.

    The tool code is mounted from ``request.snapshot`` (`tool_mounts`).

    Args:
        request: what to run.
        settings: host settings (state folder, limit overrides).
        id_factory: makes the run id.
        command: the sandbox command.
        pool_lifetime_s: how long the sandbox may wait for its run (0: no warm pool yet); a
            term of its `LifetimeCap`.
        rate_limit_wait_s: the longest rate-limit wait a run may have past its timeout (0:
            none yet); a term of its `LifetimeCap`.

    Raises:
        InputError: the id factory produced an invalid run id, or a tool folder of the run is
            not in the snapshot.
        ValueError: the run has tool folders but no snapshot (a caller's bug).
        FileExistsError: the run folder exists already (a run id is used once).
    """
    run_id = new_run_id(id_factory)
    state_dir = settings.state_dir.resolve()
    run_dir = path_for_id(state_dir / "runs", run_id, kind="run id")
    run_dir.mkdir(parents=True)
    run_dir.chmod(0o755)
    manifest = request.registry.manifest(request.policy)
    mounted_tools, tool_paths = tool_mounts(request)
    limits = resource_limits(request.policy, settings)
    start = request.clock_start
    if start is None:
        start = (
            request.task.clock_start
            if request.task.clock_start is not None
            else (DEFAULT_CLOCK_START)
        )
    run_spec = {
        "run_id": run_id,
        "mode": request.mode,
        "workflow": request.workflow.normalised(),
        "workflow_source": request.workflow.source,
        # the rubric's answer key stays on the host: code under evaluation must not read it
        "task": {k: v for k, v in request.task.record().items() if k != "expected"},
        # record: each call reads the machine's clock (a live wall clock has no step)
        "clock": {"start": start, "step_s": 0.0 if request.mode == "record" else CLOCK_STEP_S},
        "seed": SEED,
        "recorded_calls": [dict(c) for c in request.recorded_calls],
        "tool_paths": tool_paths,
        "modules": _modules(manifest),
        "deadline_s": limits.timeout_s,
    }
    assert set(run_spec) == set(protocol.RUN_SPEC_KEYS)
    _write_json(run_dir / "manifest.json", manifest)
    _write_json(run_dir / "run.json", run_spec)
    mounts = runner_mounts()
    mounts += mounted_tools
    mounts.append(Mount(run_dir, protocol.RUN_DIR))
    env = {
        "TZ": "UTC",
        "PYTHONHASHSEED": str(SEED),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": protocol.RUNTIME_ROOT,
        "HOME": "/tmp",  # noqa: S108 - the sandbox's own tmpfs
        "TMPDIR": "/tmp",  # noqa: S108
        "LANG": "C.UTF-8",
    }
    spec = SandboxSpec(
        run_id=run_id,
        image=request.image,
        command=tuple(command),
        mounts=tuple(mounts),
        env=env,
        limits=limits,
        labels={
            "io.sandbox-replay.task": request.task.task_id[:63],
            **(
                {LEDGER_KEY: request.ledger_key, LEDGER: ledger_id(settings.state_dir)}
                if request.ledger_key
                else {}
            ),
        },
        user=sandbox_user(),
        cap=LifetimeCap(
            limits.timeout_s, pool_lifetime_s=pool_lifetime_s, rate_limit_wait_s=rate_limit_wait_s
        ),
    )
    trace_path = path_for_id(state_dir / "traces", run_id, suffix=".jsonl", kind="run id")
    return PreparedRun(run_id, run_dir, trace_path, spec, manifest, run_spec)


def lookup_image_id(backend: Backend, image: str) -> str | None:
    """The image's id for the environment manifest, or None when the backend cannot tell.

    Uses the backend's ``image_id(image)`` when it has one, else the ``inspect_image`` of its
    low-level client (the Docker backend's ``api``), without importing docker here.
    """
    lookup = getattr(backend, "image_id", None)
    if not callable(lookup):
        inspect = getattr(getattr(backend, "api", None), "inspect_image", None)
        if not callable(inspect):
            return None

        def lookup(name: str) -> Any:
            return inspect(name).get("Id")

    try:
        value = lookup(image)
    except Exception as exc:  # an unknown image id is a gap in the manifest, not a failure
        log.warning("image_id_unavailable", image=image, error=str(exc))
        return None
    return str(value) if value else None


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
    with TraceWriter(prepared.trace_path, max_bytes=limits.max_trace_mb * 1024 * 1024) as trace:
        state.trace = trace
        exit_state: ExitState | None = None
        started = monotonic()
        try:
            with backend.sandbox(prepared.spec) as sandbox:
                started = monotonic()
                _drive(
                    sandbox,
                    state,
                    provider,
                    monotonic,
                    started,
                    limits.timeout_s,
                    min(hello_timeout_s, limits.timeout_s),
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
            state.finish(exit_state)
            raise
        state.sandbox_s = monotonic() - started
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
) -> None:
    """Pump frames until end of output, answering the runtime; kill on a passed deadline."""
    deadline = started + timeout_s
    if provider is not None:

        def provider_timed_out() -> None:
            state.provider_timed_out = True

        provider = DeadlineProvider(provider, lambda: deadline - monotonic(), provider_timed_out)
    hello_deadline = started + hello_timeout_s
    shutdown_deadline: float | None = None
    killed_at: float | None = None
    for frame in sandbox.frames(POLL_S):
        if frame is not None:
            for event in state.channel.feed(*frame):
                reply = state.on_event(event, provider)
                for message in reply:
                    _send(sandbox, state, message, deadline - monotonic())
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
        elif now > deadline:
            _kill(sandbox, state, "timeout")
        elif state.hello is None and now > hello_deadline:
            _kill(sandbox, state, "no_hello")
        elif shutdown_deadline is not None and now > shutdown_deadline:
            _kill(sandbox, state, "shutdown_grace")
    for event in state.channel.close():
        state.on_event(event, provider)


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
