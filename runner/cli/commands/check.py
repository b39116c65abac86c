"""``sandbox-replay check WORKFLOW... [--policy shadow] [--json]``: the load-time gate.

Walks every step of every workflow (agent toolsets included), resolves every tool id through
the policy's capability-filtered registry and reports every problem, one line each, e.g.::

    workflows/v3.yaml: step "close": tool "ticket.close" is unsafe: denied by
    policies/shadow.yaml (deny effect unsafe)                        (on one line)

A tool that argument rules of the policy target (``rules:``, `runner.policy.rules`) is eligible
but *conditional*: each of its calls is decided at call time, in the sandbox; ``check`` lists
those rules under the workflow (``conditional`` per tool in ``--json``). ``--junit FILE``
writes one JUnit case per workflow (the writer of ``reproduce --junit``): eligible passes, a
denied or unresolvable tool fails, invalid input errors.

Exit codes (SPEC.md): 0 every workflow eligible; 3 a tool is denied or does not resolve; 2 bad
input (invalid YAML, unknown key, a module that is not found or that the host's Python cannot
parse, a declaration the runtime would refuse, a scripted model function that is not found, a
folder holding no workflow: file, line and field named; a model without a price while the
policy's replay USD ceiling is set, named with its fixes: `runner.policy.pricing`, as
``submit`` and ``submit --dry-run`` refuse it). With several workflows the worst wins.

Nothing is run and no engine is needed: the tool modules are read from source
(`runner.tools.static`), never imported, so their top-level code does not run on the
host; a scripted model function is only located and found defined. A tool whose declaration is
not literal (its effect, a parameter's type) counts as ``unsafe`` and the diagnostic says what
could not be read and where (fail closed). ``submit`` and ``run`` take the same first step,
then describe the tools inside a sandbox (`runner.admission.gate`). The one
exception: an MCP stdio server (``tools: [{mcp: {command: [...]}}]``) is asked for its tools
inside a sandbox (it is the challenger's code), so a workflow naming one needs the engine and
the image; each MCP tool's class comes from its annotations, shown as ``decided_by``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from runner.admission.checkread import check_describer
from runner.admission.eligibility import check_eligibility
from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption, PriceOption
from runner.cli.render.jsonout import print_json
from runner.cli.render.junit import JUnitCase, write_junit_cases
from runner.cli.render.terminal import echo, one_line, say
from runner.domain.words import counted
from runner.errors import SandboxReplayError, worst_exit_code
from runner.policy.calldecision import conditional_rules
from runner.policy.pricing import check_prices, recorded_models, with_prices

if TYPE_CHECKING:
    from runner.admission.report import EligibilityReport, WorkflowCheck
    from runner.policy.loader import Policy
    from runner.settings import Settings


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
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit", help="Write a JUnit XML file, one case per workflow.", metavar="FILE"
        ),
    ] = None,
    price: PriceOption = None,
) -> None:
    """Tell, before anything runs, whether workflows can be sandboxed under a policy.

    Every problem is reported, each naming the workflow file, the step, the tool, its effect
    class and the policy rule. Exit 0 eligible, 3 ineligible, 2 invalid input.
    """
    # configures logging once, like every command; Settings built if an MCP server or a model
    # provider needs them (`runner.cli.lazysettings`), unless the environment sets some
    settings = state(ctx).settings(deferred=True)
    try:
        with check_describer(settings, policy) as describe:
            report = check_eligibility(
                _expand(workflows), policy, settings=settings, describe=describe
            )
        pricing = _pricing(report, price or [], settings)
    except SandboxReplayError as exc:  # the policy itself is bad input
        if junit is not None:  # CI publishes the file: it says why nothing was checked
            error = (exc.__class__.__name__, str(exc))
            write_junit_cases(
                "sandbox-replay check", [JUnitCase(policy, "check", str(exc), error=error)], junit
            )
        fail(exc)
    if junit is not None:
        write_junit_cases(
            "sandbox-replay check", [_case(report, c) for c in report.workflows], junit
        )
    if as_json:
        data = _with_conditional(report)
        if pricing is not None:
            data["prices"] = {"error": str(pricing), "models": pricing.fields.get("models", [])}
        print_json(data)
    else:
        for check in report.workflows:
            for line in _lines(report.policy, check):
                say(one_line(line))  # a problem quotes names from hostile files: one line each
        for line in str(pricing).splitlines() if pricing is not None else ():
            say(one_line(line))
        for line in _summary(report):
            echo(line, err=True)
    code = report.exit_code
    raise typer.Exit(code if pricing is None else worst_exit_code(code, pricing.exit_code))


def _pricing(
    report: EligibilityReport, prices: list[str], settings: Settings
) -> SandboxReplayError | None:
    """The plan-time price check of `runner.policy.pricing` over the loaded workflows.

    ``check`` names the policy's own replay USD ceiling (``submit`` also weighs its flags):
    a model without a price under it is invalid input (exit 2), as ``submit`` and its dry run
    refuse it.

    Raises:
        InputError: a bad ``--price`` value.
    """
    policy = with_prices(report.policy, prices)
    usd = policy.ceilings.replay.usd
    try:
        check_prices(
            policy,
            [(c.path, c.workflow) for c in report.workflows if c.workflow is not None],
            usd_ceiling=usd,
            ceiling_source=f"policy {policy.name}",
            recorded=lambda workflow: recorded_models(settings.state_dir)(workflow),
        )
    except SandboxReplayError as exc:
        return exc
    return None


def _conditional(policy: Policy, check: WorkflowCheck) -> dict[str, list[dict[str, str]]]:
    """Tool id -> the argument rules that decide its calls at call time (eligible tools)."""
    if check.workflow is None or check.registry is None:
        return {}
    found: dict[str, list[dict[str, str]]] = {}
    for tool_id in check.workflow.spec.tool_ids():
        if tool_id in check.registry and tool_id not in found:
            rules = conditional_rules(policy, tool_id)
            if rules:
                found[tool_id] = [
                    {"name": r.name, "action": r.action, "rule": r.summary()} for r in rules
                ]
    return found


def _lines(policy: Policy, check: WorkflowCheck) -> list[str]:
    """The workflow's problems, or its summary and its conditional tools."""
    if not check.eligible:
        return [p.message for p in check.problems]
    out = [check.summary_line(), *check.tool_lines()]
    for tool_id, rules in _conditional(policy, check).items():
        for rule in rules:
            out.append(
                f'  conditional: tool "{tool_id}": argument rule "{rule["name"]}" '
                f"({rule['rule']}), decided at each call by {policy.source}"
            )
    return out


def _with_conditional(report: EligibilityReport) -> dict[str, object]:
    data = report.to_json()
    for check, entry in zip(report.workflows, data["workflows"], strict=True):
        conditional = _conditional(report.policy, check)
        for tool in entry.get("tools", []):
            tool["conditional"] = conditional.get(tool["id"], [])
    return data


def _case(report: EligibilityReport, check: WorkflowCheck) -> JUnitCase:
    """The JUnit case of one workflow: eligible passes, a tool problem fails, bad input errors."""
    text = "\n".join(_lines(report.policy, check))
    invalid = [p for p in check.problems if p.kind == "invalid"]
    if invalid:
        return JUnitCase(check.path, "check", text, error=("invalid_input", invalid[0].message))
    if check.problems:
        return JUnitCase(check.path, "check", text, failure=check.problems[0].message)
    return JUnitCase(check.path, "check", text)


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
            f"{counted(len(invalid), 'input error')}: the file(s) named above could not be loaded; "
            "nothing was checked against the policy for them"
        )
    if tools:
        lines.append(
            f"{counted(len(tools), 'tool problem')} under the policy {report.policy.source}"
        )
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
