"""Import τ²-bench results (``results.json``): one trace per simulation, tasks, manifest.

Source shape (sierra-research/tau2-bench): ``info`` (agent/user model aliases and settings, the
domain policy = the agent's system prompt, ``max_steps``, git commit), ``tasks`` (id, user
scenario, evaluation criteria: expected ``actions`` and ``communicate_info``), ``simulations``
(task id, trial, seed, times, costs, ``reward_info``, ``messages``). Tools come from a tools
file beside the results (``--tools``, default ``<domain>_tools.json``): a list of
``{"name", "kind": read|write|generic, "openai_tool"}``, or plain OpenAI function tools.

Mapping (see `runner.importers.conversation` for the call shapes):

- run id ``tau2-<domain>-<task id>-<trial>``, task id ``tau2-<domain>-<task id>`` (sanitised);
  task input = the task's ``user_scenario`` (``persona``, ``instructions``); the workflow's
  simulated user is ``${task.instructions}``;
- the greeting (an assistant message with no usage and no ``raw_data``) is a fixed message;
- ``raw_data`` (the provider's choice object) is the body of model and user turns, marked as
  not the HTTP body; model ids are the configured aliases (``model_source: config``);
- reward 1 → ``succeeded``; otherwise ``failed`` with error class ``task_failed``;
- expected: ``tool_calls`` from the assistant's expected ``actions`` (arguments limited to
  ``compare_args`` when the source gives it); ``output_contains`` when ``communicate_info``
  holds exactly one string (several cannot be expressed: counted as missing, kept in the run
  line's ``meta.expected_outputs``).

Effects: ``read`` → read, ``write`` → unsafe, ``generic`` → unsafe unless mapped. A sensible
map file for the retail domain (one ``TOOL=EFFECT`` a line)::

    calculate=pure                   # evaluates an arithmetic expression, no I/O
    transfer_to_human_agents=unsafe  # hands the customer over to a human: an outside effect

``calculate`` is not mapped by default: the importer never guesses beyond the source's labels.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from runner.domain.ids import IdSet, path_for_id
from runner.errors import InputError
from runner.importers.imported import ImportSource, WorkflowShape
from runner.importers.source import (
    SourceRun,
    derive_id,
    load_json,
)
from runner.importers.tau2_messages import clock_of, message, need
from runner.importers.toolset import ImportedTool, tool_from_openai
from runner.inputfile import read_input
from runner.sdk import canonical_json
from runner.trace.strictjson import StrictJSONError

__all__ = ["read_tau2", "read_tau2_tools"]

# the user simulator's end tokens (τ²'s user simulation guidelines): a reply holding one
# ends the conversation
_USER_STOPS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")


def _load_json(path: Path, what: str) -> Any:
    name = str(path)
    raw = read_input(path, "import source")  # regular files only, size-limited
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {what}: not UTF-8 (byte {exc.start})", file=name) from None
    try:
        return load_json(text, file=name)
    except StrictJSONError as exc:  # not JSON, NaN, a duplicate key (position named)
        raise InputError(
            f"invalid JSON: {exc.detail}", file=name, line=exc.line, field=exc.field
        ) from None


def read_tau2_tools(path: Path) -> list[ImportedTool]:
    """Read a τ² tools file (``[{"name", "kind", "openai_tool"}]`` or OpenAI function tools).

    Raises:
        InputError: unreadable, not a JSON list, or a malformed entry (file and field named).
    """
    data = _load_json(path, "tools file")
    name = str(path)
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise InputError("a tools file must be a JSON list of tools", file=name)
    tools: list[ImportedTool] = []
    seen: set[str] = set()
    for i, entry in enumerate(data):
        where = f"[{i}]"
        if isinstance(entry, dict) and "openai_tool" in entry:
            kind = entry.get("kind")
            tool = tool_from_openai(
                entry["openai_tool"],
                label=kind if isinstance(kind, str) else None,
                file=name,
                field=f"{where}.openai_tool",
            )
        else:
            tool = tool_from_openai(entry, file=name, field=where)
        if tool.id in seen:
            raise InputError(f"tool {tool.id!r} is listed twice", file=name, field=where)
        seen.add(tool.id)
        tools.append(tool)
    return tools


def _instructions_text(scenario: dict[str, Any]) -> str | None:
    """``${task.instructions}`` as a rendered string: text as is, anything else canonical JSON."""
    if "instructions" not in scenario:
        return None
    value = scenario["instructions"]
    return value if isinstance(value, str) else canonical_json(value)


def _expected(task: dict[str, Any], missing: Counter[str]) -> tuple[dict[str, Any], list[Any]]:
    criteria = task.get("evaluation_criteria")
    if not isinstance(criteria, dict):  # absent, null or hostile: no expectation to take
        criteria = {}
    actions, infos = criteria.get("actions"), criteria.get("communicate_info")
    expected: dict[str, Any] = {}
    calls = []
    for action in actions if isinstance(actions, list) else []:
        if not isinstance(action, dict) or action.get("requestor", "assistant") != "assistant":
            continue
        raw_args = action.get("arguments")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        compare = action.get("compare_args")
        if isinstance(compare, list):
            args = {k: v for k, v in args.items() if k in compare}
        calls.append({"tool": action.get("name"), "args": args})
    if calls:
        expected["tool_calls"] = calls
    outputs = [o for o in (infos if isinstance(infos, list) else []) if isinstance(o, str)]
    if len(outputs) == 1:
        expected["output_contains"] = outputs[0]
    elif len(outputs) > 1:
        missing["task.expected_outputs_not_representable"] += 1
    return expected, outputs


def _tools_file_beside(path: Path, domain: str) -> Path | None:
    """``<domain>_tools.json`` beside the results; None when the domain is no file name.

    The domain comes from the results file: it names a file only through the id rules
    (`runner.domain.ids.path_for_id`), so ``../x`` never names a file elsewhere.
    """
    try:
        return path_for_id(path.parent, f"{domain}_tools", suffix=".json", kind="tools file")
    except InputError:
        return None


def read_tau2(path: Path, tools_path: Path | None = None) -> ImportSource:
    """Read a τ² results file (and its tools file) into an `ImportSource`.

    Args:
        path: ``results.json``.
        tools_path: the tools file; None looks for ``<domain>_tools.json`` beside ``path``
            (when absent, tools are taken from the calls, without schema or label).

    Raises:
        InputError: unreadable or invalid JSON, a missing or mistyped field, a simulation of
            an unknown task, a duplicate run (file and field named).
    """
    file = str(path)
    data = _load_json(path, "τ² results")
    info = need(data, "info", dict, "", file)
    simulations = need(data, "simulations", list, "", file)
    task_list = need(data, "tasks", list, "", file)
    env = info.get("environment_info") or {}
    domain = str(env.get("domain_name") or "tau2")
    agent = info.get("agent_info") or {}
    user = info.get("user_info") or {}
    policy = env.get("policy") if isinstance(env.get("policy"), str) else None
    missing: Counter[str] = Counter()
    notes: list[str] = []
    if policy is None:
        missing["workflow.system"] += 1

    if tools_path is None:
        beside = _tools_file_beside(path, domain)
        tools_path = beside if beside is not None and beside.is_file() else None
        if tools_path is not None:  # said, never silent: it decides every tool's schema
            notes.append(
                f"tools read from {tools_path} (the {domain}_tools.json beside the results; "
                "--tools FILE chooses another)"
            )
    tools = read_tau2_tools(tools_path) if tools_path is not None else []
    if tools_path is None:
        notes.append(
            f"no tools file ({domain}_tools.json): tools taken from the calls, "
            "without schema or read/write label"
        )

    tasks: dict[str, dict[str, Any]] = {}
    task_ids = IdSet("task id")
    expected: dict[str, dict[str, Any]] = {}
    outputs: dict[str, list[Any]] = {}
    for i, task in enumerate(task_list):
        source_id = str(need(task, "id", (str, int), f"tasks[{i}]", file))
        tid = derive_id(f"tau2-{domain}-{source_id}", task_ids)
        tasks[source_id] = {"task_id": tid, "task": task}
        exp, outs = _expected(task, missing)
        if exp:
            expected[tid] = exp
        outputs[tid] = outs

    def settings(side: dict[str, Any]) -> dict[str, Any]:
        alias = side.get("llm")
        raw = side.get("llm_args")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        return {**({"model": alias} if isinstance(alias, str) else {}), **args}

    run_ids = IdSet("run id")
    runs: list[SourceRun] = []
    known = {t.id for t in tools}
    for i, sim in enumerate(simulations):
        where = f"simulations[{i}]"
        source_task = str(need(sim, "task_id", (str, int), where, file))
        if source_task not in tasks:
            raise InputError(
                f"task {source_task!r} is not among the results' tasks",
                file=file,
                field=f"{where}.task_id",
            )
        entry = tasks[source_task]
        raw_messages = need(sim, "messages", list, where, file)
        messages = tuple(
            message(m, f"{where}.messages[{j}]", file) for j, m in enumerate(raw_messages)
        )
        for msg in messages:
            for call in msg.tool_calls:
                if call.name not in known:
                    known.add(call.name)
                    tools.append(ImportedTool(call.name, "", None, None, None))
        reward_info = sim.get("reward_info") if isinstance(sim.get("reward_info"), dict) else {}
        reward = reward_info.get("reward")
        trial = sim.get("trial", 0)
        failed = None
        if not isinstance(reward, int | float) or isinstance(reward, bool):
            missing["run.verdict"] += 1
        elif reward < 1:
            failed = (
                f"source verdict: reward {reward} (termination "
                f"{sim.get('termination_reason')}, reward basis "
                f"{reward_info.get('reward_basis')})"
            )
        costs = [sim.get(k) for k in ("agent_cost", "user_cost")]
        usd = (
            sum(c for c in costs if isinstance(c, int | float))
            if any(isinstance(c, int | float) for c in costs)
            else None
        )
        task = entry["task"]
        scenario = task.get("user_scenario") if isinstance(task.get("user_scenario"), dict) else {}
        meta: dict[str, Any] = {
            "source": "tau2",
            "source_task_id": source_task,
            "simulation_id": sim.get("id"),
            "trial": trial,
            "termination_reason": sim.get("termination_reason"),
            "reward": reward,
            "duration_s": sim.get("duration"),
            "agent_cost": sim.get("agent_cost"),
            "user_cost": sim.get("user_cost"),
        }
        if len(outputs[entry["task_id"]]) > 1:
            meta["expected_outputs"] = outputs[entry["task_id"]]
        seed = sim.get("seed")
        runs.append(
            SourceRun(
                run_id=derive_id(f"tau2-{domain}-{source_task}-{trial}", run_ids),
                task_id=entry["task_id"],
                task_input=dict(scenario),
                messages=messages,
                file=file,
                model_settings=settings(agent),
                user_settings=settings(user),
                model_alias=agent.get("llm") if isinstance(agent.get("llm"), str) else None,
                user_alias=user.get("llm") if isinstance(user.get("llm"), str) else None,
                failed_reason=failed,
                clock_start=clock_of(sim.get("start_time")),
                seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                usd=usd,
                meta=meta,
                system=policy,
                user_system=_instructions_text(scenario),
                end_meta={
                    "reward_info": {
                        k: reward_info.get(k)
                        for k in ("reward", "db_check", "reward_breakdown", "reward_basis")
                        if k in reward_info
                    }
                },
            )
        )
    model = None
    if isinstance(agent.get("llm"), str):
        model = {
            "provider": "openai",
            "name": agent["llm"],
            "settings": dict(agent.get("llm_args") or {}),
        }
    commit = info.get("git_commit")
    shape = WorkflowShape(
        name=f"tau2-{domain}-agent",
        version=str(commit)[:12] if isinstance(commit, str) and commit else "1",
        header=(
            f"Imported from τ²-bench results ({path.name}, domain {domain}): the generic "
            "tool-calling agent.\nSystem prompt: the domain policy. The simulated user "
            f"follows the task's instructions and ends with {', '.join(_USER_STOPS)}.\nTools are "
            "manifest-only (no code): every call is served from a recording."
        ),
        model=model,
        input_template=None,
        user="${task.instructions}",
        user_stop=_USER_STOPS,
        max_turns=int(info.get("max_steps") or 200),
    )
    return ImportSource(
        kind="tau2",
        backend="import:tau2",
        file=file,
        tools=tools,
        runs=runs,
        shape=shape,
        expected=expected,
        missing=missing,
        notes=notes,
    )
