"""The public surface of every package of runner: a curated ``__all__``, pinned here.

Each package's ``__init__`` says in its docstring what it holds and what it may import (the
directions are enforced by import-linter, pyproject.toml); its ``__all__`` is the surface other
packages and users rely on. A new package, or a change of a surface, is a change of this file
(the httpx pattern).
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import runner

PUBLIC: dict[str, list[str]] = {
    "runner": ["__version__"],
    "runner.admission": [
        "MANIFEST_TIMEOUT_S",
        "Admission",
        "EligibilityReport",
        "admit",
        "check_eligibility",
        "read_gate",
        "sandbox_gate",
        "sandbox_registry",
    ],
    "runner.backends": [
        "Backend",
        "ExitState",
        "Mount",
        "ResourceLimits",
        "Sandbox",
        "SandboxSpec",
        "sandbox_user",
    ],
    "runner.backends.docker": ["DockerBackend", "connect", "discover_engine", "engine_address"],
    "runner.backends.namespace": ["NamespaceBackend"],
    "runner.backends.warmpool": ["pool", "pooled", "poolkey"],
    "runner.backends.ray": ["SLOTS", "RayBackend", "RaySandbox", "connect_cluster"],
    "runner.cli": ["main"],
    "runner.cli.commands": ["COMMANDS", "Command", "command_name", "register"],
    "runner.cli.render": [],
    "runner.cli.render.html": ["render_job", "render_reproduce", "render_trace", "write_page"],
    "runner.domain": [
        "Registry",
        "Step",
        "Task",
        "TaskFile",
        "ToolSpec",
        "Workflow",
        "WorkflowFile",
        "load_function",
        "load_tasks",
        "load_workflow",
        "new_run_id",
        "sequential_ids",
        "validate_id",
    ],
    "runner.episode": [
        "EpisodeRequest",
        "EpisodeResult",
        "MeteredRun",
        "PreparedRun",
        "prepare_run",
        "run_episode",
        "runner_mounts",
    ],
    "runner.errors": [
        "CapabilityDenied",
        "CeilingReached",
        "EXIT_CEILING",
        "EXIT_INCONCLUSIVE",
        "EXIT_INELIGIBLE",
        "EXIT_INFRA",
        "EXIT_INPUT",
        "EXIT_INTERRUPTED",
        "EXIT_NEGATIVE",
        "EXIT_OK",
        "EXIT_REFUSED",
        "GradingError",
        "IneligibleError",
        "InfrastructureError",
        "InputError",
        "ReplayDivergence",
        "ReplayRefused",
        "SandboxReplayError",
        "ToolNotResolvable",
        "TransientInfrastructureError",
        "worst_exit_code",
    ],
    "runner.grading": [
        "JUDGES",
        "FunctionJudge",
        "Group",
        "Judge",
        "JudgeSpec",
        "ModelJudge",
        "Provider",
        "Ranking",
        "Result",
        "Standing",
        "ToolCall",
        "TournamentReport",
        "aggregate",
        "grade",
        "make_judge",
        "parse_judge",
        "rubric_judge",
    ],
    "runner.importers": [
        "ImportSource",
        "WorkflowShape",
        "read_openai_messages",
        "read_tau2",
        "read_tau2_tools",
        "read_tools_file",
        "write_import",
    ],
    "runner.importers.otel": ["read_otel"],
    "runner.ledger": [
        "Amount",
        "Budget",
        "Ceiling",
        "CeilingGuard",
        "FINISHED_STATUSES",
        "Headroom",
        "Job",
        "LEDGER_FILENAME",
        "Ledger",
        "ModelPrice",
        "PURPOSES",
        "Purpose",
        "PurposeTotals",
        "Reservation",
        "RunHistory",
        "RunRecord",
        "UNBOUNDED",
        "ZERO",
        "estimate_usd",
        "price_of",
        "prompt_tokens_bound",
        "request_bytes",
        "run_key",
    ],
    "runner.policy": [
        "ArgRule",
        "CallVerdict",
        "Ceiling",
        "Ceilings",
        "Limits",
        "Policy",
        "PolicySpec",
        "Price",
        "PolicyDiff",
        "ToolOverrides",
        "decide",
        "decide_call",
        "diff_policies",
        "disposition_for",
        "find_policy",
        "load_policy",
        "policy_from_spec",
    ],
    "runner.providers": [
        "CEILING_ERROR_CLASS",
        "DeadlineProvider",
        "MeteredProvider",
        "ModelProvider",
        "OpenAIProvider",
        "ProviderResponse",
        "ReplayProvider",
        "ScriptedProvider",
        "StopSignal",
        "provider_for",
        "provider_for_workflow",
        "response_from_body",
    ],
    "runner.reproduce": [
        "ReproduceReport",
        "Reproducer",
        "build_packet",
        "environment_diff",
        "expand_inputs",
        "first_difference",
        "is_packet",
        "refusals",
        "verdict",
    ],
    "runner.runtime": ["main"],
    "runner.runs": ["execute_run", "record_run"],
    "runner.runtime.egress": ["audit", "seccomp", "witness"],
    "runner.runtime.replay": ["calls", "recordings"],
    "runner.runtime.steps": ["engine"],
    "runner.runtime.worker": ["client", "process", "wire"],
    "runner.runtime.zygote": ["isolate", "serve"],
    "runner.sdk": [
        "Effect",
        "HttpResponse",
        "ToolDef",
        "ToolDefinitionError",
        "canonical_json",
        "collect_tools",
        "function_name",
        "http_get",
        "http_request",
        "now",
        "record",
        "replay_context",
        "schema_hash",
        "set_clock",
        "tool",
        "tool_def",
    ],
    "runner.submit": [
        "PairOutcome",
        "Plan",
        "Scheduler",
        "SubmitOptions",
        "SubmitResult",
        "Variant",
        "build_plan",
        "build_report",
        "execute",
        "grade_job",
        "job_dir",
        "load_job_file",
        "prepare",
        "write_report",
    ],
    "runner.tools": [
        "ToolLocations",
        "ToolSnapshot",
        "locate_tools",
        "registry_for_workflow",
        "static_registry",
    ],
    "runner.tools.snapshot": [
        "SnapshotEntry",
        "ToolSnapshot",
        "build_snapshot",
        "project_snapshot",
        "snapshot_for",
        "tool_mounts",
    ],
    "runner.trace": [
        "MAX_BODY_BYTES",
        "STATUSES",
        "TRACE_VERSION",
        "decode_body",
        "encode_body",
        "episode_exit_code",
        "failure_signature",
        "writer",
    ],
    "runner.tracetools": [
        "CallRecord",
        "EndRecord",
        "Extraction",
        "MAX_LINE_BYTES",
        "RunRecord",
        "Trace",
        "TraceLint",
        "TraceProblem",
        "TraceVersionError",
        "extract_tasks",
        "lint_trace",
        "lint_traces",
        "load_trace",
        "read_trace",
        "read_trace_stream",
    ],
    "runner.wire": [
        "argrules",
        "destinations",
        "env",
        "errors",
        "linearre",
        "protocol",
        "toolrecord",
        "urlhost",
        "zygote",
    ],
}


def _packages() -> list[str]:
    found = pkgutil.walk_packages(runner.__path__, "runner.")
    return ["runner", *sorted(m.name for m in found if m.ispkg)]


def test_every_package_is_pinned() -> None:
    assert _packages() == sorted(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_surface(name: str) -> None:
    package = importlib.import_module(name)
    assert sorted(package.__all__) == sorted(PUBLIC[name])
    for attribute in package.__all__:
        if not hasattr(package, attribute):  # a public submodule (runner.wire.protocol)
            importlib.import_module(f"{name}.{attribute}")


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_package_docstring_says_what_it_may_import(name: str) -> None:
    doc = importlib.import_module(name).__doc__ or ""
    assert "May import" in doc, name


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_no_exported_name_hides_a_submodule(name: str) -> None:
    """``from runner.x.mod import mod`` in an __init__ would make ``import runner.x.mod`` (and
    mock.patch("runner.x.mod.attr")) find the function, not the module."""
    package = importlib.import_module(name)
    if not hasattr(package, "__path__"):
        return
    submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    for attribute in set(package.__all__) & submodules:
        importlib.import_module(f"{name}.{attribute}")  # the submodule, as `import` binds it
        assert getattr(package, attribute).__name__ == f"{name}.{attribute}", attribute
