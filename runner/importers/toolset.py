"""The tools of an imported source: effect classes, the registry manifest, the agent workflow.

Imported tools have no code: the manifest lists them with ``module: null`` and
``qualname: null`` and they are served from recordings wherever they are called (SPEC.md,
"Workflow tools:"). Their effect class comes from the source's own label:

    read                     -> read
    write                    -> unsafe   (it changes the outside world)
    anything else / no label -> unsafe   (fail closed) unless mapped by ``--map`` or a map file

A map file holds one ``TOOL=EFFECT`` a line (``#`` starts a comment), or a JSON object
``{"TOOL": "EFFECT"}`` when its name ends in ``.json``. ``--map`` flags override the file.
Mapping a tool the source does not have is an error (a typo never silently maps nothing).

Invariants: tool ids are the source's function names and must be tool ids (`TOOL_ID`), never
a provider role (``model``, ``user``) or ``workflow``; schema hashes are
`runner.sdk.schema_hash` over each tool's ``parameters`` schema; output is deterministic
(tools in source order).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.errors import InputError
from runner.importers.source import load_json
from runner.inputfile import read_input
from runner.sdk import Effect, schema_hash
from runner.trace.format import text_hash
from runner.trace.strictjson import StrictJSONError

__all__ = [
    "MANIFEST_NAME",
    "ImportedTool",
    "as_tool_id",
    "build_manifest",
    "effect_for",
    "parse_effect_map",
    "tool_from_openai",
    "workflow_text",
]

MANIFEST_NAME = "tools.manifest.json"
TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
_RESERVED = frozenset({"model", "user", "workflow"})
_EFFECTS = tuple(e.value for e in Effect)


@dataclass(frozen=True)
class ImportedTool:
    """One tool of the source.

    Attributes:
        id: the function name (a tool id).
        description: the function description ("" when the source has none).
        schema: the ``parameters`` JSON Schema, or None when the source has no schema for it
            (a tool only seen in calls); the manifest then carries ``{}`` and the import report
            counts it as missing.
        label: the source's own read/write label (τ²'s ``kind``), or None.
        openai_tool: the tool exactly as the source sent it to the model (for requests).
    """

    id: str
    description: str
    schema: dict[str, Any] | None
    label: str | None
    openai_tool: dict[str, Any] | None


def as_tool_id(name: str) -> str | None:
    """A tool id made from a source's tool name that is not one, or None for an empty name.

    Characters outside ``[A-Za-z0-9_.-]`` become ``_``, runs of dots one dot, leading and
    trailing dots go, a reserved role name gets ``_tool`` appended; at most 128 characters.
    Applied alike to a model's call and to the tool span that ran it, so they still pair and
    a replay offers and serves the tool under the same id (``Read File`` → ``Read_File``).
    """
    if TOOL_ID.match(name) and len(name) <= 128 and name not in _RESERVED:
        return name
    cleaned = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9_.-]", "_", name)).strip(".")[:128]
    cleaned = cleaned.strip(".")
    if not cleaned:
        return None
    return f"{cleaned[:123]}_tool" if cleaned in _RESERVED else cleaned


def check_tool_id(
    name: Any, *, file: str | None = None, line: int | None = None, field: str | None = None
) -> str:
    """Return ``name`` when it can be a tool id of an imported tool.

    Raises:
        InputError: not a string, not a dotted ``[A-Za-z0-9_-]`` name, or a reserved role.
    """
    if not isinstance(name, str) or not TOOL_ID.match(name) or len(name) > 128:
        raise InputError(
            f"tool name {name!r} is not a valid tool id ([A-Za-z0-9_-], dots between parts)",
            file=file,
            line=line,
            field=field,
        )
    if name in _RESERVED:
        raise InputError(
            f"tool name {name!r} is reserved for provider turns and failures",
            file=file,
            line=line,
            field=field,
        )
    return name


def tool_from_openai(
    obj: Any,
    *,
    label: str | None = None,
    file: str | None = None,
    line: int | None = None,
    field: str = "tools",
) -> ImportedTool:
    """Read one tool in the OpenAI function format (``{"type": "function", "function": ...}``).

    A bare function object (``{"name", "parameters"}``) is accepted too.

    Raises:
        InputError: not an object, no function name, or parameters that are not an object.
    """
    if not isinstance(obj, dict):
        raise InputError(
            "a tool must be an object in the OpenAI function format",
            file=file,
            line=line,
            field=field,
        )
    function = obj.get("function", obj)
    if not isinstance(function, dict):
        raise InputError("must be an object", file=file, line=line, field=f"{field}.function")
    name = check_tool_id(function.get("name"), file=file, line=line, field=f"{field}.name")
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise InputError(
            "must be a JSON Schema object", file=file, line=line, field=f"{field}.parameters"
        )
    description = function.get("description")
    return ImportedTool(
        id=name,
        description=description if isinstance(description, str) else "",
        schema=parameters if parameters is not None else {},
        label=label,
        openai_tool=obj,
    )


def _effect(value: Any, where: str, *, file: str | None = None, line: int | None = None) -> str:
    text = str(value).strip().lower()
    if text not in _EFFECTS:
        raise InputError(
            f"effect {value!r} is not one of {', '.join(_EFFECTS)}",
            file=file,
            line=line,
            field=where,
        )
    return text


def parse_effect_map(pairs: Sequence[str] = (), map_file: Path | None = None) -> dict[str, str]:
    """Build the tool -> effect map from a map file and ``--map TOOL=EFFECT`` flags.

    Args:
        pairs: ``TOOL=EFFECT`` strings (later ones win; they override the file).
        map_file: a ``TOOL=EFFECT`` text file or a ``.json`` object.

    Raises:
        InputError: unreadable file, a line without ``=``, an unknown effect (file, line named).
    """
    result: dict[str, str] = {}
    if map_file is not None:
        name = str(map_file)
        data_bytes = read_input(map_file, "effect map")  # regular files only, size-limited
        try:
            text = data_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"cannot read map file: not UTF-8 (byte {exc.start})", file=name, field="--map-file"
            ) from None
        if map_file.suffix == ".json":
            try:
                data = load_json(text, file=name)
            except StrictJSONError as exc:  # not JSON, NaN, a duplicate key
                raise InputError(
                    f"invalid JSON: {exc.detail}", file=name, line=exc.line, field=exc.field
                ) from None
            if not isinstance(data, dict):
                raise InputError("a JSON map file must be an object {tool: effect}", file=name)
            for tool, effect in data.items():
                result[check_tool_id(tool, file=name, field=tool)] = _effect(
                    effect, tool, file=name
                )
        else:
            for number, raw in enumerate(text.splitlines(), start=1):
                entry = raw.split("#", 1)[0].strip()
                if not entry:
                    continue
                tool, sep, effect = entry.partition("=")
                if not sep:
                    raise InputError(f"expected TOOL=EFFECT, got {entry!r}", file=name, line=number)
                tool = check_tool_id(tool.strip(), file=name, line=number, field="tool")
                result[tool] = _effect(effect, tool, file=name, line=number)
    for pair in pairs:
        tool, sep, effect = pair.partition("=")
        if not sep:
            raise InputError(f"expected TOOL=EFFECT, got {pair!r}", field="--map")
        tool = check_tool_id(tool.strip(), field="--map")
        result[tool] = _effect(effect, "--map")
    return result


def effect_for(tool: ImportedTool, effect_map: Mapping[str, str]) -> str:
    """The effect class of an imported tool: the map first, then its label, else unsafe."""
    if tool.id in effect_map:
        return effect_map[tool.id]
    if tool.label == "read":
        return Effect.READ.value
    return Effect.UNSAFE.value


def build_manifest(tools: Iterable[ImportedTool], effect_map: Mapping[str, str]) -> dict[str, Any]:
    """The registry manifest of manifest-only (recorded) tools.

    Returns:
        ``{"tools": [{id, effect, description, schema, schema_hash, module: null,
        qualname: null}]}`` in source order.

    Raises:
        InputError: a mapped tool the source does not have (field ``--map``).
    """
    tools = list(tools)
    unknown = sorted(set(effect_map) - {t.id for t in tools})
    if unknown:
        raise InputError(
            f"mapped tool(s) {', '.join(unknown)} not in the source's tools "
            f"({', '.join(t.id for t in tools) or 'none'})",
            field="--map",
        )
    entries = []
    for tool in tools:
        schema = tool.schema if tool.schema is not None else {}
        entries.append(
            {
                "id": tool.id,
                "effect": effect_for(tool, effect_map),
                "description": tool.description,
                "schema": schema,
                "schema_hash": schema_hash(schema),
                "module": None,
                "qualname": None,
            }
        )
    return {"tools": entries}


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks so that prompts stay readable."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def workflow_text(
    *,
    name: str,
    version: str,
    header: str,
    tool_ids: Sequence[str],
    model: Mapping[str, Any] | None,
    system: str | None,
    fixed_messages: Sequence[Mapping[str, Any]],
    input_template: str | None,
    user: str | Mapping[str, Any] | None,
    max_turns: int,
    unlisted_tools: Sequence[str] = (),
    tool_errors: str = "return",
) -> str:
    """The YAML text of the generic tool-calling agent workflow over the imported manifest.

    One ``agent`` step (step id ``agent``) with the source's system prompt, fixed messages
    (assistant messages that were not model calls, e.g. τ²'s greeting; sent before the first
    turn, never served as model turns), the toolset (``unlisted_tools``: callable, not listed in
    the model's requests), and the simulated user's instructions; ``tool_errors: raise`` when
    the source ended the run on a tool's error (`runner.domain.agentspec.AgentSpec`).

    Returns:
        The file text (``header`` as ``#`` comment lines, then the YAML document).
    """
    agent: dict[str, Any] = {"tools": list(tool_ids), "max_turns": max_turns}
    if system is not None:
        agent["system"] = system
    if fixed_messages:
        agent["fixed_messages"] = [dict(m) for m in fixed_messages]
    if input_template is not None:
        agent["input"] = input_template
    if user is not None:
        agent["user"] = user if isinstance(user, str) else dict(user)
    if unlisted_tools:
        agent["unlisted_tools"] = list(unlisted_tools)
    if tool_errors != "return":
        agent["tool_errors"] = tool_errors
    doc: dict[str, Any] = {"name": name, "version": version, "tools": [MANIFEST_NAME]}
    if model is not None:
        doc["model"] = dict(model)
    doc["steps"] = [{"id": "agent", "agent": agent}]
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return comment + body


def content_hash(text: str) -> str:
    """The workflow hash of a trace's run line (`runner.trace.format.text_hash`: LF endings)."""
    return text_hash(text)
