"""The sandbox run behind `runner.admission.sandbox_registry`.

One short sandbox per registry: the run folder and the `SandboxSpec` come from
`runner.episode.prepare.prepare_run` (the same mounts, environment, user and limits as an
episode, so the same hardening; the modules from the command's tool snapshot), with
``run.json`` ``mode: "manifest"`` and ``modules`` set to the modules asked for; the timeout is
cut to the manifest's own. The host waits for ``hello``, sends ``start``, reads the one
``manifest`` message, sends ``shutdown`` and removes the run folder. It never writes a trace
and charges nothing to the ledger (no model call, no episode). The outbound-destination log of
the sandbox (what the modules tried to reach while being imported) comes back with the answer
(`SandboxAnswer.outbound`, at most `MAX_OUTBOUND` attempts).

Anything but a ``manifest`` message (the sandbox hung, died, or printed nonsense) is an
`InputError` naming the workflow file with the sandbox's exit code and last stderr lines: the
code being described is what failed. A backend failure stays an `InfrastructureError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.admission.answer import clean_text
from runner.domain.ids import timestamped_ids
from runner.domain.registry import Registry
from runner.domain.tasks import Task
from runner.episode.channel import Channel
from runner.episode.prepare import prepare_run, start_message
from runner.episode.request import EpisodeRequest
from runner.errors import InfrastructureError, InputError
from runner.hostlog import get_logger
from runner.wire import protocol

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.domain.workflow import WorkflowFile
    from runner.policy.loader import Policy
    from runner.settings import Settings
    from runner.tools.snapshot.toolsnapshot import ToolSnapshot

log = get_logger(__name__)

MAX_OUTBOUND = 100
ATTEMPT_KEYS = ("kind", "host", "address", "port", "resolved_from", "outcome", "pid", "event")
POLL_S = 0.2
SHUTDOWN_GRACE_S = 5.0
STDERR_LINES_SHOWN = 5


@dataclass(frozen=True)
class SandboxAnswer:
    """What the describing sandbox said.

    Attributes:
        answer: the ``manifest`` message (untrusted: the caller checks every field).
        tool_paths: the ``tool_paths`` used, aligned with the roots asked for.
        outbound: its outbound-destination log (``egress`` attempts, fields of
            `ATTEMPT_KEYS` only), in order; at most `MAX_OUTBOUND`.
    """

    answer: dict[str, Any]
    tool_paths: list[str]
    outbound: list[dict[str, Any]] = field(default_factory=list)


def ask_sandbox(
    workflow: WorkflowFile,
    modules: list[str],
    roots: list[Path],
    *,
    backend: Backend,
    settings: Settings,
    image: str,
    policy: Policy,
    timeout_s: float,
    snapshot: ToolSnapshot,
    monotonic: Callable[[], float] = time.monotonic,
    mcp_servers: Sequence[tuple[Sequence[str], Path | None]] = (),
) -> SandboxAnswer:
    """Run the runtime in mode ``manifest`` for ``modules`` and return its answer.

    Args:
        workflow: the workflow (its file is named in errors; its normalised form is written).
        modules: module names in entry order (may repeat).
        roots: host folders to mount, in order (``/sandbox/tools/0``, ...).
        backend: the sandbox backend.
        settings: host settings.
        image: the sandbox image.
        policy: the policy whose limits apply.
        timeout_s: the most the sandbox may take, seconds.
        snapshot: the command's tool snapshot (holds ``roots``).
        monotonic: the deadline clock.
        mcp_servers: (command, folder) of each MCP stdio server to ask for its tools
            (`runner.runtime.mcplist`); ``folder`` is one of ``roots``, the server's working
            folder. The answer's ``mcp`` list follows this order.

    Returns:
        The answer, the ``tool_paths`` used and the outbound-destination log.

    Raises:
        InputError: no usable answer (see the module docstring), or a root the snapshot does
            not hold.
        InfrastructureError: the backend failed.
    """
    request = EpisodeRequest(
        workflow=workflow,
        task=Task(task_id="tool-manifest", input={}),
        policy=policy,
        registry=Registry([], roots),
        image=image,
        mode="manifest",
        purpose="replay",
        snapshot=snapshot,
    )
    prepared = prepare_run(request, settings, timestamped_ids(prefix="manifest"))
    limits = prepared.spec.limits
    limits = replace(limits, timeout_s=min(limits.timeout_s, timeout_s))
    run_spec = dict(prepared.run_spec, modules=list(modules), deadline_s=limits.timeout_s)
    if mcp_servers:
        paths = list(run_spec["tool_paths"])
        run_spec["mcp_servers"] = [
            {
                "command": list(command),
                "cwd": paths[roots.index(folder)] if folder is not None else "/tmp",  # noqa: S108 - the sandbox's tmpfs
            }
            for command, folder in mcp_servers
        ]
    cap = prepared.spec.hard_cap
    spec = replace(prepared.spec, limits=limits, cap=replace(cap, run_timeout_s=limits.timeout_s))
    log.info("tool_manifest_starting", run_id=prepared.run_id, modules=len(modules))
    answer, problem, outbound = _drive(backend, spec, start_message(run_spec, None), monotonic)
    if answer is None:
        raise InputError(
            f"the tool modules could not be described inside the sandbox: {problem}",
            file=str(workflow.path),
            field="tools",
        )
    # the tool roots come first (`run_roots`); a data folder of ``files`` may follow
    return SandboxAnswer(answer, list(run_spec["tool_paths"])[: len(roots)], outbound)


def _drive(
    backend: Backend, spec: Any, start: dict[str, Any], monotonic: Callable[[], float]
) -> tuple[dict[str, Any] | None, str, list[dict[str, Any]]]:
    """The ``manifest`` message (or None and why there is none), and the outbound log."""
    channel = Channel()
    answer: dict[str, Any] | None = None
    problem = ""
    outbound: list[dict[str, Any]] = []
    with backend.sandbox(spec) as sandbox:
        deadline = monotonic() + spec.limits.timeout_s
        for frame in sandbox.frames(POLL_S):
            for event in channel.feed(*frame) if frame is not None else []:
                message = event.message
                if event.kind == "message_too_large":
                    problem = f"its answer was too large ({event.size} bytes)"
                elif event.kind != "message" or message is None:
                    continue
                elif message["type"] == "hello":
                    _write(sandbox, start)
                elif message["type"] == "egress":
                    attempt = message.get("attempt")
                    if isinstance(attempt, dict) and len(outbound) < MAX_OUTBOUND:
                        outbound.append({k: attempt[k] for k in ATTEMPT_KEYS if k in attempt})
                elif message["type"] == "manifest":
                    answer = message
                elif message["type"] == "error":
                    problem = f"the runtime failed: {message.get('message')!s:.500}"
            if answer is not None or problem:
                break
            if monotonic() > deadline:
                problem = f"it did not answer within {spec.limits.timeout_s:g} s"
                sandbox.kill()
                break
        _write(sandbox, {"type": "shutdown"})
        exit_state = sandbox.wait(SHUTDOWN_GRACE_S)
    if answer is None and not problem:
        problem = f"the sandbox exited with code {exit_state.exit_code} before answering"
        if exit_state.oom_killed:
            problem += " (out of memory)"
    if answer is None:
        tail = [line for line in channel.stderr_tail() if line.strip()][-STDERR_LINES_SHOWN:]
        if tail:
            problem += "; its last stderr lines: " + " | ".join(t[:300] for t in tail)
    return answer, clean_text(problem), outbound


def _write(sandbox: Any, message: dict[str, Any]) -> None:

    try:
        sandbox.write(protocol.encode(message), timeout_s=SHUTDOWN_GRACE_S)
    except InfrastructureError as exc:  # it may have exited: its exit state says the rest
        log.debug("tool_manifest_write_failed", error=str(exc))
