"""The ``run`` use case: one episode of a workflow on one task, in a sandbox.

The same load path as ``submit`` (`runner.admission.gate`): the tools read from source first,
nothing of them imported on the host, then described inside a sandbox from the tool snapshot;
the run is charged under ``replay`` (`runner.episode.metered_run.one_off_run`). Printing the
result is the CLI's (`runner.cli.render.episode`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from runner.admission import gate
from runner.domain.ids import timestamped_ids, validate_id
from runner.domain.tasks import Task, load_tasks
from runner.episode.images import ImageUse, image_source, require_images, workflow_image_source
from runner.episode.limits import check_engine_limits
from runner.episode.metered_run import call_cap, one_off_run
from runner.episode.request import EpisodeRequest
from runner.errors import SandboxReplayError
from runner.policy import load_policy
from runner.providers.workflows import provider_for_workflow
from runner.tools.snapshot.sources import project_snapshot

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.episode.request import EpisodeResult
    from runner.settings import Settings

__all__ = ["asked_task", "execute_run"]

SkippedLine = Callable[[SandboxReplayError], None]
"""Told each rejected line of a task file (file and line named; the other lines still load)."""


def asked_task(tasks_path: Path, task_id: str, on_skipped_line: SkippedLine) -> Task:
    """The task ``--task`` names: it runs when its own line loaded; bad lines are said.

    Raises:
        InputError: an id that is not an id (``--task``), a task file that cannot be read, or
            no task of that id (`runner.domain.tasks.TaskFile.get`).
    """
    validate_id(task_id, kind="task id", field="--task")
    task_file = load_tasks(tasks_path)
    for error in task_file.errors:
        on_skipped_line(error)
    return task_file.get(task_id)


def execute_run(
    settings: Settings,
    workflow_path: Path,
    tasks_path: Path,
    task_id: str,
    *,
    image: str | None = None,
    policy_name: str = "shadow",
    backend: Backend | None = None,
    backend_factory: Callable[[], Backend] | None = None,
    on_skipped_line: SkippedLine = lambda error: None,
) -> EpisodeResult:
    """Load everything, check eligibility, run one episode charged under ``replay``.

    The tool modules are never imported on the host: read from source first, then described
    inside a sandbox (`runner.admission.gate`); only the scripted model function, the user's
    own host-side code, is imported here (it runs on the host by design).

    Args:
        settings: host settings.
        workflow_path: the workflow file.
        tasks_path: the task file.
        task_id: the task to run.
        image: the sandbox image when the workflow names none (its own ``image:`` wins; default:
            the settings').
        policy_name: policy name or path.
        backend: a backend to use (not closed here).
        backend_factory: makes the backend when ``backend`` is None (made after the input
            loaded, closed after the run); the CLI passes the one ``--backend`` chose.
        on_skipped_line: told each line of the task file that was rejected (file and line
            named); the asked task still runs when its own line loaded.

    Returns:
        The episode result (trace written).

    Raises:
        InputError: a bad workflow, task file, task id, policy or model function; an image
            the engine lacks (`runner.episode.images.require_images`).
        IneligibleError: a workflow tool is denied or unresolvable under the policy.
        CeilingReached: the policy's ``replay`` ceiling leaves no room for the run.
        InfrastructureError: the backend is unusable (Docker unreachable, bwrap missing).
        ValueError: neither ``backend`` nor ``backend_factory`` given (a caller's bug).
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)

    task = asked_task(tasks_path, task_id, on_skipped_line)
    policy = load_policy(policy_name)
    # The load path `submit` shares (runner/admission/gate.py): the tools read from
    # source first (nothing of them imported here), then described inside a sandbox below.
    report = gate.read_gate([workflow_path], policy, settings=settings)
    workflow = report.workflows[0].workflow
    assert workflow is not None  # it loaded, or read_gate raised
    model = workflow.spec.model
    provider = provider_for_workflow(workflow, cwd=Path.cwd(), settings=settings)
    # What the sandbox sees of the project: a copy of the declared tool code and data files,
    # taken now (runner/tools/snapshot/toolsnapshot.py); never the tasks file or the state folder.
    snapshot = project_snapshot([workflow], state_dir=settings.state_dir, exclude=[tasks_path])
    named_by = (
        workflow_image_source(workflow_path, workflow)
        if workflow.spec.image
        else image_source(settings, "--image" if image else None)
    )
    image = workflow.spec.image or image or settings.image  # a workflow's own image wins
    own_backend = backend is None
    if backend is None:
        if backend_factory is None:
            raise ValueError("execute_run needs a backend or a backend_factory")
        backend = backend_factory()
    try:
        check_engine_limits(backend, policy, settings)  # cpus above the engine's: exit 2
        # an image the engine lacks: exit 2 naming it, before any sandbox or ledger row
        require_images(backend, [ImageUse(image, f"workflow {workflow_path}", named_by)])
        # the registry the run uses: described in a sandbox from the snapshot (kept by its
        # digest: a second run over the same snapshot starts no describing sandbox)
        report = gate.sandbox_gate(
            report,
            backend=backend,
            settings=settings,
            image=image,
            snapshot=snapshot,
        )
        registry = report.workflows[0].registry
        request = EpisodeRequest(
            workflow=workflow,
            task=task,
            policy=policy,
            registry=registry,
            image=image,
            mode=policy.mode,
            snapshot=snapshot,
        )
        # SPEC.md: every run and model call is charged with its purpose; a sandboxed run is
        # `replay`: the run (reserved before it starts) and each model call (reserved before it
        # is forwarded, as in submit), so the policy's replay ceilings hold here too.
        return one_off_run(
            request,
            purpose="replay",
            command="run",
            backend=backend,
            settings=settings,
            provider=provider,
            id_factory=timestamped_ids(),
            spend="per_call",
            model=(model.name or model.provider) if model is not None else None,
            max_tokens=call_cap(policy.ceilings.replay),
        )
    finally:
        close = getattr(backend, "close", None)  # `Backend` declares no close() yet
        if own_backend and callable(close):
            close()
