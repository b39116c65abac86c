"""The ``run`` use case: one episode of a workflow on one task, in a sandbox.

The same load path as ``submit`` (`runner.admission.gate`): the tools read from source first,
nothing of them imported on the host, then described inside a sandbox from the tool snapshot;
the run is charged under ``replay``. Those steps are `runner.admission.onerun`'s, shared with
the anchored fork; the task file and the backend's lifetime are this module's. Printing the
result is the CLI's (`runner.cli.render.episode`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from runner.admission.onerun import read_for_one_run
from runner.domain.ids import timestamped_ids, validate_id
from runner.domain.tasks import Task, load_tasks
from runner.errors import SandboxReplayError

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
    task = asked_task(tasks_path, task_id, on_skipped_line)
    # The load path `submit` shares (runner/admission/gate.py): the tools read from source
    # first (nothing of them imported here), then described inside a sandbox by `admit`.
    one = read_for_one_run(
        settings, workflow_path, policy_name=policy_name, image=image, exclude=[tasks_path]
    )
    own_backend = backend is None
    if backend is None:
        if backend_factory is None:
            raise ValueError("execute_run needs a backend or a backend_factory")
        backend = backend_factory()
    try:
        registry = one.admit(backend)
        return one.run(registry, task, backend=backend, command="run", id_factory=timestamped_ids())
    finally:
        close = getattr(backend, "close", None)  # `Backend` declares no close() yet
        if own_backend and callable(close):
            close()
