"""A workflow admitted for one run of its own, then run once and charged under ``replay``.

``run`` (`runner.runs.run.execute_run`) and the anchored fork (`runner.reproduce.fork.
fork_trace`) take the same steps, and this is their one home: the policy loaded, the load
gate's first stage (`runner.admission.gate.read_gate`: the tools read from source, nothing of
them imported on the host), the workflow's model provider, the tool snapshot the sandbox sees
(`runner.tools.snapshot.sources.project_snapshot`) and the image (the workflow's own ``image``
wins over the caller's, then the settings') — `read_for_one_run`; with the backend, the
engine's limits checked and the registry described in a sandbox (`OneRun.admit`); then one
episode, a ledger job of its own charged per model call under the policy's ``replay``
ceiling (`OneRun.run`, `runner.episode.metered_run.one_off_run`).

What stays each caller's: where the task comes from (``run``: the task file; the fork: the
anchor trace), the backend's lifetime (``run`` may be handed one it does not close), what
refuses the run after the registry is known (the fork: its recorded prefix against the
registry) and the request's further fields (the fork's prefix, K and clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.admission import gate
from runner.episode.images import ImageUse, image_source, require_images, workflow_image_source
from runner.episode.limits import check_engine_limits
from runner.episode.metered_run import call_cap, one_off_run
from runner.episode.request import EpisodeRequest
from runner.policy import load_policy
from runner.providers.workflows import provider_for_workflow
from runner.tools.snapshot.sources import project_snapshot

if TYPE_CHECKING:
    from collections.abc import Iterable

    from runner.admission.eligibility import EligibilityReport
    from runner.backends.base import Backend
    from runner.domain.ids import IdFactory
    from runner.domain.registry import Registry
    from runner.domain.tasks import Task
    from runner.domain.workflow import WorkflowFile
    from runner.episode.request import EpisodeResult
    from runner.policy import Policy
    from runner.providers.base import ModelProvider
    from runner.settings import Settings
    from runner.tools.snapshot.toolsnapshot import ToolSnapshot

__all__ = ["OneRun", "read_for_one_run"]


@dataclass(frozen=True)
class OneRun:
    """A workflow read for one run: what the load gate's first stage and the snapshot gave.

    Attributes:
        settings: host settings.
        workflow: the loaded workflow.
        policy: the loaded policy.
        report: the eligibility report of the first stage (the tools read from source).
        provider: the workflow's model provider; None without a model.
        snapshot: the tool snapshot the sandbox is given.
        image: the sandbox image.
        image_named_by: where the image was named, for a missing image's error
            (`runner.episode.images.ImageUse.named_by`).
        workflow_path: the workflow file, as errors name it.
    """

    settings: Settings
    workflow: WorkflowFile
    policy: Policy
    report: EligibilityReport
    provider: ModelProvider | None
    snapshot: ToolSnapshot
    image: str
    image_named_by: str
    workflow_path: Path

    def admit(self, backend: Backend) -> Registry:
        """The second stage on ``backend``: the engine's limits, the registry a sandbox describes.

        Returns:
            The registry the run uses (described from the snapshot, filtered by the policy).

        Raises:
            InputError: ``cpus`` above the engine's, an image the engine lacks (exit 2 naming
                it and ``image build --tag``, before any sandbox or ledger row), or a module
                the sandbox cannot import.
            IneligibleError: a tool the sandbox describes is denied or does not resolve.
            InfrastructureError: the backend failed.
        """
        check_engine_limits(backend, self.policy, self.settings)  # cpus above the engine's
        use = ImageUse(self.image, f"workflow {self.workflow_path}", self.image_named_by)
        require_images(backend, [use])
        # described in a sandbox from the snapshot (kept by its digest: a second run over the
        # same snapshot starts no describing sandbox)
        report = gate.sandbox_gate(
            self.report,
            backend=backend,
            settings=self.settings,
            image=self.image,
            snapshot=self.snapshot,
        )
        registry = report.workflows[0].registry
        assert registry is not None  # described, or sandbox_gate raised
        return registry

    def run(
        self,
        registry: Registry,
        task: Task,
        *,
        backend: Backend,
        command: str,
        id_factory: IdFactory,
        **request_fields: Any,
    ) -> EpisodeResult:
        """One episode of the workflow on ``task``, a ledger job of ``command`` of its own.

        SPEC.md: every run and model call is charged with its purpose; a sandboxed run is
        ``replay``: the run (reserved before it starts) and each model call (reserved before
        it is forwarded, as in submit), so the policy's replay ceilings hold here too.

        Args:
            registry: `admit`'s registry.
            task: the task to run.
            backend: the backend `admit` was given.
            command: the ledger job's command and its id's prefix (``run``, ``fork``).
            id_factory: makes the run id.
            **request_fields: further `EpisodeRequest` fields (the fork's ``recorded_calls``,
                ``fork_at``, ``clock_start``).

        Returns:
            The episode result (trace written).

        Raises:
            CeilingReached: the policy's ``replay`` ceiling leaves no room for the run.
            InputError: invalid run id.
        """
        request = EpisodeRequest(
            workflow=self.workflow,
            task=task,
            policy=self.policy,
            registry=registry,
            image=self.image,
            mode=self.policy.mode,
            snapshot=self.snapshot,
            **request_fields,
        )
        model = self.workflow.spec.model
        return one_off_run(
            request,
            purpose="replay",
            command=command,
            backend=backend,
            settings=self.settings,
            provider=self.provider,
            id_factory=id_factory,
            spend="per_call",
            model=(model.name or model.provider) if model is not None else None,
            max_tokens=call_cap(self.policy.ceilings.replay),
        )


def read_for_one_run(
    settings: Settings,
    workflow_path: Path,
    *,
    policy_name: str,
    image: str | None,
    exclude: Iterable[Path],
    cwd: Path | None = None,
) -> OneRun:
    """The load gate's first stage, the model provider, the tool snapshot and the image.

    Nothing of the tool modules is imported on the host; only the scripted model function,
    the user's own host-side code, is (it runs on the host by design).

    Args:
        settings: host settings.
        workflow_path: the workflow file.
        policy_name: policy name or path.
        image: the caller's image (``--image``), used when the workflow names none; None:
            the settings'.
        exclude: files never put in the snapshot (the task file, the anchor trace).
        cwd: where a scripted model module is searched besides the workflow's folder
            (default: the current directory).

    Raises:
        InputError: a bad workflow, policy or model function.
        IneligibleError: a tool read literally is denied, or an id does not resolve.
    """
    policy = load_policy(policy_name)
    report = gate.read_gate([workflow_path], policy, settings=settings)
    workflow = report.workflows[0].workflow
    assert workflow is not None  # it loaded, or read_gate raised
    provider = provider_for_workflow(workflow, cwd=cwd or Path.cwd(), settings=settings)
    # What the sandbox sees of the project: a copy of the declared tool code and data files,
    # taken now (runner/tools/snapshot/toolsnapshot.py); never the excluded files or the
    # state folder.
    snapshot = project_snapshot([workflow], state_dir=settings.state_dir, exclude=list(exclude))
    return OneRun(
        settings=settings,
        workflow=workflow,
        policy=policy,
        report=report,
        provider=provider,
        snapshot=snapshot,
        image=workflow.spec.image or image or settings.image,  # a workflow's own image wins
        image_named_by=(
            workflow_image_source(workflow_path, workflow)
            if workflow.spec.image
            else image_source(settings, "--image" if image else None)
        ),
        workflow_path=workflow_path,
    )
