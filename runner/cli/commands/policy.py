"""``sandbox-replay policy diff OLD NEW --against TRACE|DIR... [--json]``.

Decides every recorded tool call of the traces under both policies (`runner.policy.diff`,
with the decision function the sandbox's call-time guard uses) and reports, per tool, the calls
newly denied and newly allowed (a few examples each, their arguments printed inert), the
unchanged counts, the calls whose tool a policy cannot resolve and the argument rules that
matched no call (unused). Exit codes (SPEC.md): 0 nothing changed, 1 something did (a verdict),
2 invalid input (a policy, a trace: file, line and field named), 5 a trace of an unknown version.

``--against`` takes trace files or folders of ``*.jsonl``: repeat it, or list several after it
(``--against a.jsonl traces/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.render.jsonout import print_json
from runner.cli.render.terminal import echo
from runner.errors import InputError, SandboxReplayError
from runner.policy.diff import diff_policies
from runner.policy.loader import load_policy

policy_app = typer.Typer(help="Compare policies on recorded calls.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")


@policy_app.command("diff")
def diff_command(
    ctx: typer.Context,
    policies: Annotated[
        list[str],
        typer.Argument(
            help="OLD and NEW: policy names (./policies/NAME.yaml, then the defaults) or files;"
            " further arguments are more traces for --against.",
            metavar="OLD NEW",
            show_default=False,
        ),
    ],
    against: Annotated[
        list[Path] | None,
        typer.Option(
            "--against",
            help="Trace files or folders of *.jsonl traces whose recorded tool calls are decided.",
            metavar="TRACE|DIR",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Decide every recorded tool call under OLD and NEW: exit 0 no change, 1 changed."""
    state(ctx).settings()  # configures logging once, like every command
    try:
        if len(policies) < 2:
            raise InputError("policy diff needs two policies, OLD and NEW", field="OLD NEW")
        traces = [*(against or []), *(Path(p) for p in policies[2:])]
        if not traces:
            raise InputError("no traces: give --against TRACE|DIR...", field="--against")
        # each named by its own argument in errors (load_policy's default says --policy)
        old = load_policy(policies[0], field="OLD")
        new = load_policy(policies[1], field="NEW")
        report = diff_policies(old, new, traces)
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print_json(report.to_json())
    else:
        for line in report.lines():
            echo(line)
    raise typer.Exit(report.exit_code)
