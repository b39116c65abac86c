"""Workflow files: the frozen, strictly validated model of a versioned agent definition.

A workflow (YAML) has ``name``, ``version``, ``tools`` (module names or tool-manifest paths that
make its registry), optional ``files`` (globs of the data files its tool code reads, relative to
the workflow file: they join the tool snapshot, `runner.tools.snapshot`), an optional
``model`` and ``steps``; each step is a tool call with ``args``, an agent loop with a toolset,
or the user's own agent code (``program: module:function`` with a declared ``tools`` set and an
optional per-step ``model``; SPEC.md, docs/internals.md). `load_workflow` reads one file and
reports every bad input as an `InputError` naming the file, the line and the field: invalid
YAML, an unknown key (with "did you mean"), a wrong type, a duplicate step id, or a
``${...}`` reference to a step that does not exist or does not come earlier.

Invariants: models are frozen and forbid unknown keys; ``version`` is always a string; a
validated `Workflow` has unique step ids and only backward step references.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runner.domain.agentspec import AgentSpec, FixedMessage, Frozen, UserSpec
from runner.domain.mcpentry import McpEntry
from runner.domain.stepspec import ModelSpec, Step
from runner.domain.yamlsource import (
    Loc,
    YamlDocument,
    field_name,
    load_yaml,
    located_error,
    validation_error,
)
from runner.errors import InputError
from runner.trace.format import text_hash

__all__ = [
    "AgentSpec",
    "FixedMessage",
    "ModelSpec",
    "Step",
    "UserSpec",
    "Workflow",
    "WorkflowFile",
    "load_workflow",
    "references",
    "workflow_problems",
]

MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
WORKFLOW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
_TEMPLATE = re.compile(r"\$\{([^}]*)\}")
_TASK_REF = re.compile(r"^task\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")
_STEP_REF = re.compile(r"^steps\.([A-Za-z0-9_-]+)\.output(\.[A-Za-z0-9_-]+)*\Z")


# A Docker image reference (distribution/reference's grammar, simplified): an optional registry
# host[:port], lowercase path components, an optional tag and an optional sha256 digest.
_IMAGE_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
IMAGE_REF = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"(?::[0-9]+)?/)?"
    rf"{_IMAGE_COMPONENT}(?:/{_IMAGE_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?\Z"
)


_GLOB_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _file_glob(value: str) -> str:
    r"""A ``files`` entry: a glob relative to the workflow file that stays inside its folder.

    ``/`` separates folders; ``*``, ``?`` and ``[...]`` match within one name and ``**`` any
    number of folders. Absolute paths, drive letters, ``\`` and ``..`` are refused: a glob
    may never reach outside the workflow's folder. ``./`` prefixes are dropped.
    """
    if not value or not value.strip():
        raise ValueError("a files entry is empty")
    if _GLOB_CONTROL.search(value):
        raise ValueError(f"{value!r} holds a control character")
    if "\\" in value:
        raise ValueError(f"{value!r}: use / to separate folders, not \\")
    path = PurePosixPath(value)
    if path.is_absolute() or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{value!r} is absolute: files globs are relative to the workflow file")
    if ".." in path.parts:
        raise ValueError(f"{value!r} reaches outside the workflow's folder (..)")
    parts = [part for part in path.parts if part != "."]
    if not parts:
        raise ValueError(f"{value!r} names the workflow's folder itself: name files or globs")
    return "/".join(parts)


FileGlob = Annotated[str, AfterValidator(_file_glob)]


def _file_path(value: str) -> str:
    """A path relative to the workflow file, inside its folder (a `FileGlob` without glob)."""
    if any(c in value for c in "*?["):
        raise ValueError(f"{value!r} is a glob: name one file")
    return _file_glob(value)


FilePath = Annotated[str, AfterValidator(_file_path)]


class Workflow(Frozen):
    """A named, versioned agent definition (the validated content of a workflow file).

    Attributes:
        name: workflow name (ASCII letters, digits, ``_ . -``; starts alphanumeric).
        version: version label; an integer in the file is accepted and kept as its text.
        tools: dotted module names, ``.json`` tool-manifest paths relative to the file, or
            MCP sources (``{mcp: {command: [...]}}`` / ``{mcp: {tools_list: FILE}}``,
            `runner.domain.mcpentry.McpEntry`).
        files: globs (relative to the file, inside its folder) of data files the tool code
            reads; they are copied into the tool snapshot beside the modules.
        model: the model provider of agent steps; None when the workflow has none.
        steps: the steps, in order (at least one).
        requirements: the pip requirements file (relative to the workflow file, inside its
            folder) the sandbox image was built from (``sandbox-replay image build
            --requirements``); ``packet`` ships it, so that a colleague can build the same
            image. Not installed or read by runs.
        image: the sandbox image this version runs in (a Docker image reference, e.g.
            ``sandbox-replay:sdk-2``); None: the command's ``--image`` or the settings'
            ``SANDBOX_REPLAY_IMAGE``. A workflow's own image wins over both, so that two
            variants of one ``submit`` can run on two images (an SDK upgrade compared); the
            image id each run used is in its trace's environment.
    """

    name: str
    version: str
    tools: list[str | McpEntry] = Field(default_factory=list)
    files: list[FileGlob] = Field(default_factory=list, max_length=1000)
    model: ModelSpec | None = None
    steps: list[Step] = Field(min_length=1)
    requirements: FilePath | None = None
    image: str | None = Field(default=None, max_length=255)

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        if value is not None and not IMAGE_REF.match(value):
            raise ValueError(
                f"{value!r} is not a Docker image reference (name[:tag][@sha256:digest], "
                "lowercase name components)"
            )
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not WORKFLOW_NAME.match(value):
            raise ValueError(
                f"workflow name {value!r} must be ASCII letters, digits, '_', '.' or '-' "
                "and start with a letter or digit"
            )
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("version must be a string or an integer")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            raise ValueError(f'version {value!r} is a number: quote it (version: "{value}")')
        if isinstance(value, str) and not value.strip():
            raise ValueError("version is empty")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, tools: list[str | McpEntry]) -> list[str | McpEntry]:
        seen: set[str | McpEntry] = set()
        for entry in tools:
            if isinstance(entry, McpEntry):
                pass
            elif not (entry.endswith(".json") or MODULE_NAME.match(entry)):
                raise ValueError(
                    f"{entry!r} is neither a dotted module name nor a path ending in .json"
                )
            if entry in seen:
                raise ValueError(f"{entry!r} is listed twice")
            seen.add(entry)
        return tools

    @field_validator("files")
    @classmethod
    def _files(cls, files: list[str]) -> list[str]:
        duplicate = next((f for i, f in enumerate(files) if f in files[:i]), None)
        if duplicate is not None:
            raise ValueError(f"{duplicate!r} is listed twice")
        return files

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Workflow:
        if info.context and info.context.get("defer_problems"):
            return self  # load_workflow reports them with their lines
        problems = workflow_problems(self)
        if problems:
            raise ValueError("; ".join(message for _, message in problems))
        return self

    def normalised(self) -> dict[str, Any]:
        """The workflow as the runtime receives it (docs/internals.md, ``run.json``)."""
        model = None
        if self.model is not None:
            model = self.model.model_dump(mode="json", exclude_none=True)
        return {
            "name": self.name,
            "version": self.version,
            "tools": [
                t if isinstance(t, str) else t.model_dump(mode="json", exclude_none=True)
                for t in self.tools
            ],
            "model": model,
            "steps": [step.normalised() for step in self.steps],
        }

    def tool_ids(self) -> list[str]:
        """Every tool id any step may call, in order of first use."""
        return list(dict.fromkeys(t for step in self.steps for t in step.tool_ids()))

    def program_steps(self) -> list[Step]:
        """The program steps, in order."""
        return [step for step in self.steps if step.program is not None]


def references(value: Any, loc: Loc = ()) -> Iterator[tuple[Loc, str]]:
    """Every ``${...}`` reference inside ``value`` (nested dicts, lists and strings).

    Yields:
        ``(loc, reference)`` with the location of the string holding it.
    """
    if isinstance(value, str):
        for match in _TEMPLATE.finditer(value):
            yield loc, match.group(1).strip()
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from references(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from references(item, (*loc, index))


def workflow_problems(workflow: Workflow) -> list[tuple[Loc, str]]:
    """Problems spanning several steps: duplicate step ids and bad ``${...}`` references.

    Returns:
        ``(loc, message)`` pairs, loc relative to the workflow document, in file order.
    """
    problems: list[tuple[Loc, str]] = list(_agent_model_problems(workflow))
    earlier: set[str] = set()
    all_ids = {step.id for step in workflow.steps}
    for index, step in enumerate(workflow.steps):
        here: Loc = ("steps", index)
        if step.id in earlier:
            problems.append(((*here, "id"), f"step id {step.id!r} is used twice"))
        fields: list[tuple[Loc, Any]] = [((*here, "args"), step.args or {})]
        if step.agent is not None:
            fields.append(((*here, "agent", "system"), step.agent.system))
            fields.append(((*here, "agent", "input"), step.agent.input))
            user = step.agent.user
            if isinstance(user, UserSpec):
                fields.append(((*here, "agent", "user", "system"), user.system))
            else:
                fields.append(((*here, "agent", "user"), user))
        for base, value in fields:
            for loc, ref in references(value, base):
                message = _reference_problem(ref, step.id, earlier, all_ids)
                if message:
                    problems.append((loc, message))
        earlier.add(step.id)
    return problems


def _agent_model_problems(workflow: Workflow) -> Iterator[tuple[Loc, str]]:
    """Agent steps speak Chat Completions: an ``openai`` model needs a name, no ``anthropic``."""
    model = workflow.model
    if model is None or not any(step.agent is not None for step in workflow.steps):
        return
    if model.provider == "openai" and not model.name:
        yield ("model", "name"), "an openai provider of agent steps needs 'name' (the model)"
    if model.provider == "anthropic":
        yield (
            ("model", "provider"),
            "the anthropic provider answers program steps (the Messages API), not agent steps "
            "(their turns are Chat Completions): give the program step its own 'model'",
        )


def _reference_problem(ref: str, step_id: str, earlier: set[str], all_ids: set[str]) -> str:
    if _TASK_REF.match(ref):
        return ""
    match = _STEP_REF.match(ref)
    if match is None:
        return (
            f"${{{ref}}} is not a reference: use ${{task.FIELD}} or "
            "${steps.STEP_ID.output} with an optional .path"
        )
    target = match.group(1)
    if target in earlier:
        return ""
    if target == step_id:
        return f"${{{ref}}}: step {step_id!r} cannot use its own output"
    if target in all_ids:
        return f"${{{ref}}}: step {target!r} comes later than step {step_id!r}"
    return f"${{{ref}}}: there is no step {target!r}"


@dataclass(frozen=True)
class WorkflowFile:
    """A loaded workflow file.

    Attributes:
        path: the file as given.
        source: the file's text (a trace carries it: traces are self-contained).
        content_hash: `runner.trace.format.text_hash` of its text (sha256, LF line endings).
        spec: the validated workflow.
        document: the parsed YAML with the line of every value (for diagnostics).
    """

    path: Path
    source: str
    content_hash: str
    spec: Workflow
    document: YamlDocument

    @property
    def folder(self) -> Path:
        """The folder holding the file (module names and manifest paths resolve from it)."""
        return self.path.resolve().parent

    def line_of(self, loc: Loc) -> int | None:
        """1-based line of the value at ``loc`` (e.g. ``("steps", 2, "tool")``), if known."""
        return self.document.line_of(loc)

    def normalised(self) -> dict[str, Any]:
        """The workflow as the runtime receives it (docs/internals.md)."""
        return self.spec.normalised()


def load_workflow(path: str | Path) -> WorkflowFile:
    """Load and validate one workflow file.

    Args:
        path: the YAML file.

    Returns:
        The loaded file with its validated `Workflow`.

    Raises:
        InputError: unreadable file, invalid YAML, unknown key, wrong type, duplicate step id,
            bad reference; names the file, the line and the field.
    """
    path = Path(path)
    doc = load_yaml(path, what="workflow")
    if not isinstance(doc.data, dict):
        raise InputError(
            "a workflow must be a YAML mapping (name, version, tools, steps)",
            file=str(path),
            line=doc.line_of(()),
        )
    try:
        spec = Workflow.model_validate(doc.data, context={"defer_problems": True})
    except ValidationError as exc:
        raise validation_error(doc, exc, Workflow, what="workflow") from None
    problems = workflow_problems(spec)
    if problems:
        error = located_error(doc, *problems[0])
        for loc, message in problems[1:]:
            error.message += f"\n{path}:{doc.line_of(loc)}: {field_name(loc)}: {message}"
        error.args = (error.message,)
        raise error
    return WorkflowFile(
        path=path,
        source=doc.text,
        # line endings do not count: a CRLF checkout has the hash recorded on Linux
        content_hash=text_hash(doc.text),
        spec=spec,
        document=doc,
    )
