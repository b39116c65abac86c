"""``sandbox-replay check WORKFLOW... [--policy shadow] [--json]``: the load-time gate.

Walks every step of every workflow (agent toolsets included), resolves every tool id through
the policy's capability-filtered registry and reports every problem, one line each, e.g.::

    workflows/v3.yaml: step "close": tool "ticket.close" is unsafe: denied by
    policies/shadow.yaml (deny effect unsafe)                        (on one line)

Exit codes (SPEC.md): 0 every workflow eligible; 3 a tool is denied or does not resolve; 2 bad
input (invalid YAML, unknown key, a module that is not found or that the host's Python cannot
parse, a declaration the runtime would refuse, a scripted model function that is not found, a
folder holding no workflow: file, line and field named). With several workflows the worst wins.

Nothing is run and no engine is needed: the tool modules are read from source
(`runner.domain.toolstatic`), never imported, so their top-level code does not run on the
host; a scripted model function is only located and found defined. A tool whose declaration is
not literal (its effect, a parameter's type) counts as ``unsafe`` and the diagnostic says what
could not be read and where (fail closed). ``submit`` and ``run`` take the same first step,
then describe the tools inside a sandbox (`runner.episode.toolmanifest.admission`). The one
exception: an MCP stdio server (``tools: [{mcp: {command: [...]}}]``) is asked for its tools
inside a sandbox (it is the challenger's code), so a workflow naming one needs the engine and
the image; each MCP tool's class comes from its annotations, shown as ``decided_by``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.terminal import echo
from runner.errors import SandboxReplayError

if TYPE_CHECKING:
    from runner.policy.eligibility import EligibilityReport


@app.command("check")
def check_command(
    ctx: typer.Context,
    workflows: Annotated[
        list[Path],
        typer.Argument(
            help="Workflow files (YAML), or folders of *.yaml / *.yml workflows.",
            show_default=False,
        ),
    ],
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="Policy name (./policies/NAME.yaml first, then the defaults) or a policy file.",
            metavar="NAME|FILE",
        ),
    ] = "shadow",
    as_json: JsonOption = False,
) -> None:
    """Tell, before anything runs, whether workflows can be sandboxed under a policy.

    Every problem is reported, each naming the workflow file, the step, the tool, its effect
    class and the policy rule. Exit 0 eligible, 3 ineligible, 2 invalid input.
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.episode.toolmanifest.admission import check_describer
    from runner.policy.eligibility import check_eligibility

    settings = state(ctx).settings()  # configures logging once, like every command
    try:
        with check_describer(settings, policy) as describe:
            report = check_eligibility(
                _expand(workflows), policy, settings=settings, describe=describe
            )
    except SandboxReplayError as exc:  # the policy itself is bad input
        fail(exc, as_json=as_json)
    if as_json:
        echo(json.dumps(report.to_json(), indent=2, ensure_ascii=True))
    else:
        for line in report.lines():
            echo(line)
        for line in _summary(report):
            echo(line, err=True)
    raise typer.Exit(report.exit_code)


def _summary(report: EligibilityReport) -> list[str]:
    """The closing lines on stderr: input errors apart from what the policy decided.

    The policy is named only for tools it denied or that do not resolve (its decisions); a
    file that could not be read or parsed is the file's fault, not the policy's.
    """
    invalid = [p for p in report.problems if p.kind == "invalid"]
    tools = [p for p in report.problems if p.kind != "invalid"]
    lines = []
    if invalid:
        lines.append(
            f"{len(invalid)} input error(s): the file(s) named above could not be loaded; "
            "nothing was checked against the policy for them"
        )
    if tools:
        lines.append(f"{len(tools)} tool problem(s) under the policy {report.policy.source}")
    return lines


def _expand(paths: list[Path]) -> list[Path]:
    """Workflow files of ``paths``: files as given, folders replaced by their YAML files.

    A folder with no YAML file stays as itself: the check reports it as invalid input (exit 2),
    so that a mistyped folder never passes a CI gate as "eligible".
    """
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
            out.extend(found or [path])
        else:
            out.append(path)
    return out
