"""What changed between the recorded and the replayed environment manifest.

`environment_diff` lists python, platform, tool schema hashes, workflow hash, model ids, the
agent code files whose hash changed (``agent_code``: `runner.sdk.agentcode`), and the packages
that matter (on both sides with another version, or imported by the tool modules,
`tool_imports`); the many packages only one side has (a host virtualenv against a sandbox
image) are one summary line (`packages_diff`). Pure functions over JSON records, except
`tool_imports`, which reads the tool files (bounded, with the AST: nothing runs).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.inputfile import read_input
from runner.sdk import pyparse

__all__ = ["environment_diff", "normalise_package", "packages_diff", "tool_imports"]

_NON_ALNUM = re.compile(r"[-_.]+")


def _model_ids(calls: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({str(c["model"]) for c in calls if c.get("tool") == "model" and c.get("model")})


def environment_diff(
    recorded_env: Mapping[str, Any],
    replayed_env: Mapping[str, Any],
    recorded_workflow_hash: str,
    replayed_workflow_hash: str,
    recorded_calls: Sequence[Mapping[str, Any]],
    replayed_calls: Sequence[Mapping[str, Any]],
    imports: Collection[str] = (),
) -> list[dict[str, Any]]:
    """What differs between the two environment manifests.

    Args:
        recorded_env: the recording's environment manifest.
        replayed_env: the replay's.
        recorded_workflow_hash: the recorded workflow's content hash.
        replayed_workflow_hash: the replayed one's.
        recorded_calls: the recording's call records (model ids).
        replayed_calls: the replay's.
        imports: distribution or import names the tool modules import (`packages_diff`).

    Returns:
        ``[{field, recorded, now}]`` for python, platform, workflow hash, model ids, each tool
        schema hash that changed (``tools.<id>``), each agent file whose hash changed
        (``agent_code.<path>``, when both sides hash it), packages that matter
        (``packages.<name>``)
        and one ``packages`` line summarising the rest (`packages_diff`).
    """
    diff: list[dict[str, Any]] = []
    for field in ("python", "platform"):
        if recorded_env.get(field) != replayed_env.get(field):
            diff.append(
                {
                    "field": field,
                    "recorded": recorded_env.get(field),
                    "now": replayed_env.get(field),
                }
            )
    if recorded_workflow_hash != replayed_workflow_hash:
        diff.append(
            {
                "field": "workflow.hash",
                "recorded": recorded_workflow_hash,
                "now": replayed_workflow_hash,
            }
        )
    models_then, models_now = _model_ids(recorded_calls), _model_ids(replayed_calls)
    if models_then != models_now:
        diff.append({"field": "model", "recorded": models_then, "now": models_now})
    tools_then = recorded_env.get("tools") or {}
    tools_now = replayed_env.get("tools") or {}
    for tool_id in sorted(set(tools_then) | set(tools_now)):
        if tools_then.get(tool_id) != tools_now.get(tool_id):
            diff.append(
                {
                    "field": f"tools.{tool_id}",
                    "recorded": tools_then.get(tool_id),
                    "now": tools_now.get(tool_id),
                }
            )
    diff.extend(_agent_code_diff(recorded_env.get("agent_code"), replayed_env.get("agent_code")))
    diff.extend(packages_diff(recorded_env.get("packages"), replayed_env.get("packages"), imports))
    return diff


def _agent_code_diff(recorded: Any, replayed: Any) -> list[dict[str, Any]]:
    """``agent_code.<path>`` entries: each agent file whose hash differs (both sides hash).

    A side without ``agent_code`` (a trace written before it, a run without program steps)
    says nothing about the code, so nothing is compared.
    """
    if not isinstance(recorded, Mapping) or not isinstance(replayed, Mapping):
        return []
    return [
        {
            "field": f"agent_code.{path}",
            "recorded": recorded.get(path),
            "now": replayed.get(path),
            "why": "the agent's code changed",
        }
        for path in sorted(set(recorded) | set(replayed))
        if recorded.get(path) != replayed.get(path)
    ]


def normalise_package(name: str) -> str:
    """PEP 503 form of a package or import name: ``Pydantic_Settings`` is ``pydantic-settings``."""
    return _NON_ALNUM.sub("-", name).lower()


def packages_diff(
    recorded: Mapping[str, Any] | None,
    replayed: Mapping[str, Any] | None,
    imports: Collection[str] = (),
) -> list[dict[str, Any]]:
    """The packages part of the environment diff: what matters named, the rest in one line.

    A recording made on a host (its virtualenv) and a replay in a sandbox image list very
    different package sets; most of that says nothing about the run. Named one by one
    (``packages.<name>``, with ``why``): a package on both sides whose version differs, and a
    package the tool modules import (``imports``) that is missing on one side or differs.
    Everything else (only on one side, not imported by the tools) is counted in one ``packages``
    entry with a ``summary`` line. Names compare in PEP 503 form (``pydantic_settings`` and
    ``pydantic-settings`` are one package).

    Args:
        recorded: the recording's ``{name: version}``.
        replayed: the replay's ``{name: version}``.
        imports: distribution or import names of the modules the tool modules import.
    """
    then = {normalise_package(k): (k, v) for k, v in (recorded or {}).items()}
    now = {normalise_package(k): (k, v) for k, v in (replayed or {}).items()}
    wanted = {normalise_package(i) for i in imports}
    diff: list[dict[str, Any]] = []
    only_then = only_now = 0
    for key in sorted(set(then) | set(now)):
        old, new = then.get(key), now.get(key)
        if old is not None and new is not None and old[1] == new[1]:
            continue
        if key in wanted:
            why = "imported by the tools"
        elif old is not None and new is not None:
            why = "on both sides"
        else:
            only_then += 1 if new is None else 0
            only_now += 1 if old is None else 0
            continue
        name = (old or new or (key, None))[0]
        diff.append(
            {
                "field": f"packages.{name}",
                "recorded": old[1] if old else None,
                "now": new[1] if new else None,
                "why": why,
            }
        )
    if only_then or only_now:
        diff.append(
            {
                "field": "packages",
                "recorded": f"{len(then)} packages",
                "now": f"{len(now)} packages",
                "recorded_count": len(then),
                "now_count": len(now),
                "only_recorded": only_then,
                "only_now": only_now,
                "summary": (
                    f"{only_then} only in the recording, {only_now} only in the replay; none of"
                    " them imported by the tool modules"
                ),
            }
        )
    return diff


def tool_imports(files: Iterable[str | Path]) -> set[str]:
    """Top-level modules the tool modules import, and the host's distributions providing them.

    Read with the AST (nothing runs); an unreadable file adds nothing. The distribution names
    come from the host's ``importlib.metadata.packages_distributions()`` (``yaml`` -> ``PyYAML``).
    """
    names: set[str] = set()
    for path in set(files):
        try:
            source = read_input(path, "tool source")  # a packet's file: bounded, regular
            tree = pyparse.parse(source.decode("utf-8"), filename=str(path))
        except (InputError, SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    providers = importlib.metadata.packages_distributions()
    return names | {dist for name in names for dist in providers.get(name, ())}
