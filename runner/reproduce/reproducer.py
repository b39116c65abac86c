"""``reproduce``: replay a recorded episode in the sandbox, strict, and judge the outcome.

For each trace (SPEC.md "What runs during reproduce"): read it (never written: its sha256 is
checked after the run), decide whether strict replay can start at all (`refusals`), then run
the recorded workflow (or ``--workflow``) in the Docker sandbox under the ``reproduce`` policy:
``pure`` tools execute and are compared, every other tool call and every model and user turn
is served from the trace by position, the clock readings are the trace's, there is no network.
The replay is charged under purpose ``replay`` (never ``live``). The verdict
(`runner.reproduce.diff`, put together by `runner.reproduce.report`) is one of:

| outcome          | exit | meaning                                                        |
|------------------|------|----------------------------------------------------------------|
| ``reproduced``   | 0    | the recorded outcome: same signature and calls, or same success |
| ``not_reproduced`` | 1  | something else; first differing call, egress, environment diff |
| ``refused``      | 5    | strict replay cannot start; exactly why                        |
| ``invalid``      | 2    | the input is unreadable (file, line, field)                    |
| ``infra_error``  | 6    | Docker failed; never a verdict                                 |

Refusals are what makes serving impossible or meaningless: an unknown trace version, a trace
without its end line (the recorded outcome is unknown), a call with no response at all (no
body and no error), a recorded workflow that cannot be loaded, a recorded tool missing from
today's registry or with another schema hash. What ``lint`` merely flags (a model id that is
an alias, a body that is not the raw HTTP body) never refuses.

Reproduce never runs the input's code on the host: the registry (tool ids, effect classes,
schema hashes) is built inside a sandbox (`runner.admission`), the tool
modules are only located here — in the trace's own folder alone (`reproduce_inputs.
tool_folder`), never the current directory or the installed packages — and copied into one
tool snapshot per trace (what the description sandbox and the replay both mount; never the
trace itself), and model turns come from the trace (`ReplayProvider`), so a packet's scripted
model function is never imported either. The trace's own copy of its workflow is written
inside the run's scratch folder, its recorded name checked by the id rules
(`runner.domain.ids.path_for_id`). Refusals the trace alone shows are found before any sandbox
starts.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.admission.describe import sandbox_registry
from runner.domain.ids import path_for_id, timestamped_ids
from runner.domain.tasks import Task
from runner.domain.workflow import load_workflow
from runner.episode.metered_run import one_off_run
from runner.episode.reaping import connect_here
from runner.episode.request import EpisodeRequest
from runner.errors import InfrastructureError, InputError, ReplayRefused
from runner.hostlog import get_logger
from runner.inputfile import open_input
from runner.ledger import Ledger
from runner.policy import load_policy
from runner.providers.replay import ReplayProvider
from runner.reproduce.inputs import (
    is_packet,
    packet_trace,
    recorded_workflow_file,
    safe_extract,
    tool_folder,
)
from runner.reproduce.mcprecorded import recorded_tools_lists
from runner.reproduce.report import (
    ReproduceReport,
    compare,
    recorded_outcome,
    strict_determinism,
    with_host_sites,
)
from runner.settings import Settings
from runner.tools.locate import locate_tools
from runner.tools.snapshot.sources import run_roots, snapshot_for
from runner.tracetools.reader import NO_RESPONSE, Trace, TraceVersionError, read_trace
from runner.tracetools.registrycheck import registry_refusals

if TYPE_CHECKING:
    from runner.domain.registry import Registry
    from runner.domain.workflow import WorkflowFile
    from runner.policy.loader import Policy
    from runner.tools.snapshot.toolsnapshot import ToolSnapshot

log = get_logger(__name__)

# What to do when the recorded workflow's tool modules are not found (as `packet` says).
WORKFLOW_HINT = "run it from the project folder, or pass --workflow FILE"


def _sha256(path: Path) -> str:
    """The sha256 hex of the trace or packet at ``path``, read as what its name says it is.

    Raises:
        InputError: not a readable regular file, or over its kind's size limit (the kind named).
    """
    digest = hashlib.sha256()
    with open_input(path, "packet" if is_packet(path) else "trace") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def trace_refusals(trace: Trace) -> list[str]:
    """The reasons strict replay of ``trace`` cannot start that the trace alone shows."""
    reasons = [f"{p.file}:{p.line}: {p.message}" for p in trace.problems]
    for _line, call in trace.unanswered():
        reasons.append(NO_RESPONSE.format(index=call.index, tool=call.tool))
    return reasons


def refusals(trace: Trace, registry: Registry) -> list[str]:
    """Every reason strict replay of ``trace`` with ``registry`` cannot start (empty: it can).

    Args:
        trace: the read trace.
        registry: today's registry of the workflow (`runner.domain.registry.Registry`).
    """
    return trace_refusals(trace) + registry_refusals(trace, registry)


@dataclass
class Reproducer:
    """Reproduces traces one after the other, sharing one backend.

    Args:
        settings: host settings.
        workflow: ``--workflow``: replaces the recorded workflow (a changed version).
        image: the sandbox image (default: the settings').
        policy_name: the reproduce policy.
        backend_factory: makes the backend on first use (default: the settings' backend of
            this machine, `runner.episode.reaping.connect_here`).
        strict_determinism: ``--strict-determinism``: a replay that read what its trace does
            not pin is refused (`runner.reproduce.report.strict_determinism`).
    """

    settings: Settings
    workflow: Path | None = None
    image: str | None = None
    policy_name: str = "reproduce"
    backend_factory: Callable[[], Any] | None = None
    strict_determinism: bool = False
    _backend: Any = None

    def close(self) -> None:
        """Close the backend, if one was made."""
        if self._backend is not None:
            self._backend.close()
        self._backend = None

    def backend(self) -> Any:
        """The backend, made (and reaped) on first use.

        Raises:
            InfrastructureError: Docker is unusable.
        """
        if self._backend is None:
            if self.backend_factory is not None:
                self._backend = self.backend_factory()
            else:
                self._backend = connect_here(self.settings)
        return self._backend

    def reproduce(self, path: Path) -> ReproduceReport:
        """Reproduce one trace file or packet; the verdict (never raises for a bad trace)."""
        try:
            before = _sha256(path)
        except InputError as exc:  # a FIFO, a device, too large: invalid, the others still run
            return ReproduceReport(str(path), "invalid", str(exc))
        with tempfile.TemporaryDirectory(prefix="sandbox-replay-reproduce-") as scratch:
            report = self._reproduce(path, Path(scratch))
        report = replace(report, trace_sha256=before)
        if self.strict_determinism:
            report = strict_determinism(report)
        after = _sha256(path)
        if after != before:  # pragma: no cover - nothing here writes to it
            raise AssertionError(f"{path} changed during reproduce")
        log.info("reproduce_verdict", input=str(path), outcome=report.outcome)
        return report

    def _reproduce(self, path: Path, scratch: Path) -> ReproduceReport:
        name = str(path)
        try:
            trace_path = path
            if is_packet(path):
                safe_extract(path, scratch / "packet")
                trace_path = packet_trace(scratch / "packet", path)
            trace = read_trace(trace_path)
        except TraceVersionError as exc:
            return ReproduceReport(name, "refused", str(exc), refusals=[str(exc)])
        except InputError as exc:
            return ReproduceReport(name, "invalid", str(exc))
        recorded = recorded_outcome(trace)
        try:
            workflow, folder = self._workflow(trace, trace_path, scratch, is_packet(path))
        except ReplayRefused as exc:
            return ReproduceReport(
                name, "refused", str(exc), recorded=recorded, refusals=[str(exc)]
            )
        except InputError as exc:
            return ReproduceReport(name, "invalid", str(exc), recorded=recorded)
        early = trace_refusals(trace)  # no sandbox for a trace that is refused anyway
        if early:
            return ReproduceReport(
                name,
                "refused",
                "strict replay would not start: " + "; ".join(early),
                recorded=recorded,
                refusals=early,
            )
        policy = load_policy(self.policy_name)
        try:
            # One snapshot for the description sandbox and the replay: both see the same code,
            # copied now; never the trace itself (runner/tools/snapshot/toolsnapshot.py).
            snapshot = snapshot_for(
                [(workflow, locate_tools(workflow, confined_to=folder))],
                state_dir=self.settings.state_dir,
                exclude=[path, trace_path],
            )
            # Never imported here: the tool code may be a packet's (`runner.admission.describe`).
            registry = sandbox_registry(
                workflow,
                backend=self.backend,  # made only when a module is to be described
                settings=self.settings,
                image=self.image or self.settings.image,
                policy=policy,
                # a trace's (a packet's) tool entries resolve in its own folder alone
                confined_to=folder,
                snapshot=snapshot,
                # an MCP server the trace listed is not started, not even to list its tools
                recorded_mcp=recorded_tools_lists(trace, workflow),
            )
        except InfrastructureError as exc:
            return ReproduceReport(name, "infra_error", str(exc), recorded=recorded)
        except InputError as exc:
            reason = f"today's registry of the workflow cannot be built: {exc}"
            if self.workflow is None:
                reason += f"; {WORKFLOW_HINT}"
            return ReproduceReport(name, "refused", reason, recorded=recorded, refusals=[reason])
        reasons = refusals(trace, registry)
        if reasons:
            return ReproduceReport(
                name,
                "refused",
                "strict replay would not start: " + "; ".join(reasons),
                recorded=recorded,
                refusals=reasons,
            )
        return self._run(name, trace, workflow, registry, recorded, policy, snapshot)

    def _workflow(
        self, trace: Trace, trace_path: Path, scratch: Path, packet: bool = False
    ) -> tuple[Any, Path | None]:
        """The workflow to replay and the one folder its tool entries resolve in.

        ``--workflow``: the user's own file, resolved as ``check`` does (folder None). Else the
        trace's workflow: a file with its hash (its folder), or the trace's own copy written
        in ``scratch`` (the trace's folder; a packet's ``workflow/`` folder): never the
        current directory, never the installed packages (`runner.tools.locate.
        locate_tools`).
        """
        if self.workflow is not None:
            return load_workflow(self.workflow), None
        recorded = trace.run.workflow
        found = recorded_workflow_file(trace_path, recorded.hash, self.settings.state_dir.name)
        folder = tool_folder(found, trace_path, packet=packet)
        if found is None:
            if not recorded.content.strip():
                raise ReplayRefused(
                    "the trace carries no workflow content (a run recorded without a workflow "
                    "file): pass --workflow FILE"
                )
            # the name is the trace's: it names a file only through the id rules, in scratch
            found = path_for_id(
                scratch / "workflow",
                recorded.name,
                suffix=".yaml",
                kind="workflow name",
                file=str(trace_path),
                line=1,
                field="workflow.name",
            )
            found.parent.mkdir(parents=True, exist_ok=True)
            found.write_text(recorded.content, encoding="utf-8")
        try:
            return load_workflow(found), folder
        except InputError as exc:
            raise ReplayRefused(f"the recorded workflow cannot be loaded: {exc}") from exc

    def _run(
        self,
        name: str,
        trace: Trace,
        workflow: WorkflowFile,
        registry: Registry,
        recorded: dict[str, Any],
        policy: Policy,
        snapshot: ToolSnapshot,
    ) -> ReproduceReport:
        run = trace.run
        calls = [c.to_json() for c in trace.calls]
        request = EpisodeRequest(
            workflow=workflow,
            task=Task(task_id=run.task_id, input=dict(run.task_input), clock_start=run.clock.start),
            policy=policy,
            registry=registry.restrict(policy),
            image=self.image or self.settings.image,
            mode="reproduce",
            purpose="replay",
            recorded_calls=calls,
            clock_start=run.clock.start,
            snapshot=snapshot,
        )
        try:
            result = one_off_run(
                request,
                purpose="replay",
                command="reproduce",
                backend=self.backend(),
                settings=self.settings,
                provider=ReplayProvider(calls),
                id_factory=timestamped_ids(prefix="repro"),
                spend="none",
            )
        except InfrastructureError as exc:
            return ReproduceReport(name, "infra_error", str(exc), recorded=recorded)
        # the sites the runtime saw under /sandbox/tools/i: the user's files (the mounts' order)
        roots = run_roots(workflow, registry.tool_roots())
        report = with_host_sites(compare(name, trace, registry, result, recorded), roots)
        # the verdict is the job's status in `jobs --all` (the job is named by the replay's id)
        with Ledger.for_state_dir(self.settings.state_dir) as ledger:
            ledger.set_job_outcome(result.run_id, report.outcome)
        return report
