"""The trace line records of format v1: frozen, strict pydantic models, one per line type.

`runner.tracetools.reader` reads files into these; docs/trace.schema.json publishes the same shapes
(tests/unit/trace/test_trace_schema.py holds the two together). Models are ``extra="forbid"`` and
strict (no coercion: ``"1"`` is not an integer); the first seed's five fields are optional, as
``lint`` reports their absence. ``meta`` is the one free-form, non-normative key.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from runner.domain.ids import id_problem
from runner.trace.format import EpisodeStatus
from runner.trace.modelapi import ApiName

__all__ = [
    "MODELS",
    "PROVIDER_ROLES",
    "CallError",
    "CallRecord",
    "EndRecord",
    "Environment",
    "Failure",
    "MessagesFrom",
    "Meter",
    "OutboundAttempt",
    "Record",
    "Redaction",
    "RunClock",
    "RunRecord",
    "WorkflowRef",
]

PROVIDER_ROLES = ("model", "user")
_API_FIELDS = ("api", "forwarded", "http_status", "messages_from")
"""Call ``tool`` values that are provider turns (a model, a simulated user), not tools."""

ToolId = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$", max_length=128)
]
Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Status = EpisodeStatus  # SPEC.md's statuses: runner.trace.format's, the one list


class Record(BaseModel):
    """Base of the line records: frozen, strict, unknown keys forbidden."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON object it was read from (only the keys the line had)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Redaction(Record):
    """One redacted value of a line: where, by which rule, how long; never the value.

    Attributes:
        field: the location in the line (``body``, ``args.token``, ``meta.http[1].body``).
        rule: the rule that found it (a detector, a pattern or path name, ``header``).
        length: the value's length in characters.
        placeholder: what the trace holds instead (`runner.trace.redact.PLACEHOLDER`).
    """

    field: str = Field(min_length=1, max_length=2000)
    rule: str = Field(pattern=r"^[a-z0-9_]{1,40}$")
    length: int = Field(ge=0)
    placeholder: str = Field(pattern=r"^\[REDACTED:[a-z0-9_]{1,40}:[0-9a-f]{8}\]$")


Redactions = tuple[Redaction, ...]


def _path_safe(value: str, kind: str) -> str:
    """``value`` when the id rules allow it (it may become a file name), else ValueError."""
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(f"invalid {kind}: {problem}")
    return value


class WorkflowRef(Record):
    """The workflow a run executed: name, version, sha256 hex of its content, its text.

    ``name`` obeys the id rules (`runner.domain.ids.id_problem`), as ``run_id`` and
    ``task_id`` do: ``reproduce`` writes the recorded workflow to a file of that name, and
    every command that reads a trace (``lint``, ``tasks extract``, ``packet``, ``policy
    diff``, ``reproduce``) refuses the same traces (``lint`` and ``tasks
    extract`` took a name ``reproduce`` rejected).
    """

    name: str = Field(min_length=1)
    version: str
    hash: Sha256Hex
    content: str

    @field_validator("name")
    @classmethod
    def _path_safe(cls, value: str) -> str:
        return _path_safe(value, "workflow name")


class RunClock(Record):
    """The injected clock: ``start`` epoch seconds, ``step_s`` seconds per call (0 = wall)."""

    start: float
    step_s: float = Field(ge=0)


class Environment(Record):
    """The environment manifest: python, platform, packages, image id, tool schema hashes.

    ``tool_snapshot`` (optional, added in 0.1.0 without a ``v`` change): sha256 hex of the
    tool snapshot the sandbox mounted (`runner.tools.snapshot`). ``agent_code`` (optional,
    added in 0.1.0): ``{path: sha256 hex}`` of each program step's module and the modules of
    its folder it imports (`runner.sdk.agentcode`), paths relative to the module's folder.
    """

    python: str | None = None
    platform: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    image: str | None = None
    image_id: str | None = None
    tools: dict[ToolId, str | None]
    policy_hash: str | None = None
    host: dict[str, Any] | None = None
    tool_snapshot: str | None = None
    agent_code: dict[str, Sha256Hex] | None = Field(default=None, max_length=1000)


class RunRecord(Record):
    """The first line of a trace (``type: run``)."""

    v: int
    type: Literal["run"]
    run_id: str
    task_id: str
    task_input: dict[str, Any]
    workflow: WorkflowRef
    purpose: Literal["live", "replay", "judge"]
    mode: str | None = None
    backend: str = Field(min_length=1, max_length=64)
    # the Ray node id (--backend ray); its container's name (labels.container_name: <= 240), or id
    node: str | None = Field(default=None, min_length=1, max_length=256)
    sandbox: str | None = Field(default=None, min_length=1, max_length=256)
    clock: RunClock
    seed: int
    environment: Environment
    policy: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None
    redactions: Redactions | None = Field(default=None, strict=False)  # a JSON list
    meta: dict[str, Any] | None = None

    @field_validator("run_id", "task_id")
    @classmethod
    def _path_safe(cls, value: str) -> str:
        return _path_safe(value, "id")


class CallError(Record):
    """A failed call's error: ``class`` (qualified exception name) and ``message``."""

    class_: str = Field(alias="class", min_length=1)
    message: str


class MessagesFrom(Record):
    """A turn's history by reference: the first ``count`` request messages of call ``call``.

    An optional addition to version 1: an importer writes each turn's new
    messages only, so that a trace grows linearly with its conversation; `read_trace`
    resolves the reference (docs/trace-format.md, "History by reference").
    """

    call: int = Field(ge=0)
    count: int = Field(ge=0)


class CallRecord(Record):
    """One tool or provider call (``type: call``). The seed fields are optional here.

    Attributes:
        tool: a tool id, or ``model`` / ``user`` for a provider turn (`PROVIDER_ROLES`).
        args: tool calls only; ``request``, ``model``, ``model_source``, ``usage``: provider
            turns only (`is_provider_call`).
        api, forwarded, http_status: a program step's model call (optional; added by issue
            13): the API the request arrived on, the body sent to the provider when it
            differs from ``request``, the HTTP status the program got.
        body, body_encoding, truncated, original_length, sha256: the raw response body
            (`runner.trace.format.encode_body`); ``original_length`` is in bytes.
        clock: epoch seconds of the injected clock; ``duration_s``: seconds.
        encoding: how a tool's value that JSON could not encode as returned was recorded
            (`runner.trace.jsonform`): ``json_form`` (its ``model_dump``/dataclass fields) or
            ``repr`` (its repr text: ``lint`` reports the body as missing); None: as returned.
        messages_from: a provider turn's history by reference (`MessagesFrom`); after
            `runner.tracetools.reader.read_trace` it is None and ``request`` is whole.
    """

    v: int
    type: Literal["call"]
    index: int = Field(ge=0)
    step_id: str | None = None
    tool: ToolId
    effect: Literal["pure", "read", "local", "unsafe"] | None = None
    args: dict[str, Any] | None = None
    request: dict[str, Any] | None = None
    body: str | None = None
    body_encoding: Literal["text", "base64"] | None = None
    truncated: bool | None = None
    original_length: int | None = Field(default=None, ge=0)
    sha256: str | None = None
    content_encoding: str | None = None
    schema_hash: str | None = None
    model: str | None = None
    model_source: Literal["response", "config"] | None = None
    usage: dict[str, Any] | None = None
    api: ApiName | None = None
    forwarded: dict[str, Any] | None = None
    http_status: int | None = Field(default=None, ge=100, le=599)
    messages_from: MessagesFrom | None = None
    clock: float | None = None
    duration_s: float | None = Field(default=None, ge=0)
    source: Literal["executed", "observation", "trace", "provider"] | None = None
    raw_io: bool | None = None
    encoding: Literal["json_form", "repr"] | None = None
    error: CallError | None = None
    redactions: Redactions | None = Field(default=None, strict=False)  # a JSON list
    meta: dict[str, Any] | None = None

    @property
    def is_provider_call(self) -> bool:
        """True for a model or simulated-user turn, False for a tool call."""
        return self.tool in PROVIDER_ROLES

    @property
    def mcp_method(self) -> str | None:
        """The MCP method of a call an MCP server answered (``meta.mcp.method``), or None."""
        mcp = (self.meta or {}).get("mcp")
        method = mcp.get("method") if isinstance(mcp, dict) else None
        return method if isinstance(method, str) else None

    @property
    def is_mcp_protocol_call(self) -> bool:
        """True for an MCP server's protocol request (``mcp.*``: any method but ``tools/call``).

        Not a tool: no schema hash, in no registry (docs/trace-format.md, "MCP traffic").
        """
        method = self.mcp_method
        return method is not None and method != "tools/call" and self.tool.startswith("mcp.")

    @model_validator(mode="after")
    def _role_fields(self) -> CallRecord:
        present = self.model_fields_set
        wrong: list[str]
        if self.is_provider_call:
            if "request" not in present or self.request is None:
                raise ValueError("[request] a model or user call needs its request object")
            wrong = [k for k in ("args", "effect", "schema_hash", "encoding") if k in present]
        else:
            if "args" not in present or self.args is None:
                raise ValueError("[args] a tool call needs its args object")
            wrong = [
                k
                for k in ("request", "model", "model_source", "usage", *_API_FIELDS)
                if k in present
            ]
        if wrong:
            kind = "a model or user call" if self.is_provider_call else "a tool call"
            raise ValueError(f"[{wrong[0]}] not allowed on {kind} (tool {self.tool!r})")
        return self


class Failure(Record):
    """The failure that ended an episode; its `failure_signature` inputs."""

    call_index: int = Field(ge=-1)
    tool: ToolId
    error_class: str = Field(min_length=1)
    exit_code: int


class ToolErrorRef(Record):
    """One tool call that ended in an error (an item of `ToolErrors`)."""

    call_index: int = Field(ge=0)
    tool: ToolId
    error_class: str | None = None


class ToolErrors(Record):
    """The end line's ``tool_errors`` (`runner.trace.format.tool_errors`): failed tool calls.

    Attributes:
        count: how many tool calls of the episode ended in an error.
        calls: the first of them (at most `runner.trace.format.MAX_TOOL_ERRORS`).
    """

    count: int = Field(ge=1)
    calls: tuple[ToolErrorRef, ...] = Field(default=(), strict=False)  # a JSON list


class UndeclaredTool(Record):
    """A tool a program step offered its model that the step does not declare (named only).

    Attributes:
        step_id: the program step.
        name: the name the request offered it under.
        requests: how many of the step's requests offered it.
    """

    step_id: str
    name: str = Field(min_length=1, max_length=128)
    requests: int = Field(ge=1)


class LimitHit(Record):
    """The policy limit that cut a ``limit_exceeded`` run: its name and the value in effect."""

    name: Literal["max_calls", "max_trace_mb"]
    value: int = Field(ge=1)


class OutboundAttempt(BaseModel):
    """One outbound destination: its first attempt's fields and ``count``, the attempts at it.

    An open record (the audit hook may add keys). Traces written before destinations were
    merged have one record per attempt and no ``count``.
    """

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    kind: str | None = None
    host: str | None = None
    address: str | None = None
    port: int | None = None
    resolved_from: str | None = None
    outcome: str | None = None
    pid: int | None = None
    count: int | None = Field(default=None, ge=1)


class Meter(Record):
    """Meter totals of the episode: tokens, USD, sandbox seconds."""

    tokens_in: int = Field(default=0, ge=0)
    tokens_out: int = Field(default=0, ge=0)
    model_calls: int = Field(default=0, ge=0)
    usd: float = Field(default=0.0, ge=0)
    sandbox_s: float = Field(default=0.0, ge=0)
    # seconds held waiting on provider rate limits, not counted against the run's timeout
    rate_limit_wait_s: float = Field(default=0.0, ge=0)


class EndRecord(Record):
    """The last line of a trace (``type: end``)."""

    v: int
    type: Literal["end"]
    status: Status
    exit_code: int | None
    failure: Failure | None = None
    failure_signature: str | None = None
    error: CallError | None = None
    reason: str | None = None
    limit: LimitHit | None = None
    output: Any = None
    not_run: tuple[str, ...] = Field(default=(), strict=False)  # a JSON list
    tool_errors: ToolErrors | None = None
    undeclared_tools: tuple[UndeclaredTool, ...] | None = Field(
        default=None, strict=False, max_length=1000
    )  # a JSON list
    outbound: tuple[OutboundAttempt, ...] = Field(default=(), strict=False)
    outbound_dropped: int | None = Field(default=None, ge=0)
    coverage: Literal["full", "partial"] | None = None
    coverage_detail: list[dict[str, Any]] | None = None
    divergences: list[dict[str, Any]] | None = None
    divergences_dropped: int | None = Field(default=None, ge=0)
    # reproduce: {entries: [{kind, what, count, site?, via?, present?}], dropped}
    nondeterminism: dict[str, Any] | None = None
    meter: Meter | None = None
    sandbox: dict[str, Any] | None = None
    channel: dict[str, Any] | None = None
    stderr_tail: list[str] | None = None
    redactions: Redactions | None = Field(default=None, strict=False)  # a JSON list
    meta: dict[str, Any] | None = None


MODELS: dict[str, type[Record]] = {"run": RunRecord, "call": CallRecord, "end": EndRecord}
