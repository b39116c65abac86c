"""Record mode in a user's own process: `runner.sdk.record(path)` writes a trace.

Standard library only, Python 3.9+ (users import it in production processes).

While a `Recorder` is active (``with runner.sdk.record(path) as rec:``), every call of a
``@tool`` function in this context (and in threads started inside it) is executed for real and
recorded; model and simulated-user turns are recorded with `Recorder.model` /
`Recorder.user`. On exit the trace is written at once (to ``path + ".part"``, then renamed), in
the format of docs/trace-format.md: a ``run`` line, one ``call`` line per call with the five
fields (raw body, schema hash at call time, model id read from the response body, clock
reading, and on the ``end`` line the failure signature), and an ``end`` line.

Invariants:
- recording never changes the agent (issue 27): a tool's value and exception reach the
  agent exactly as the tool produced them; nothing the recorder does while a call runs
  raises into user code (a step of it that fails is noted as ``meta.recorder_error``), and a
  trace that cannot be written at exit is a `RuntimeWarning` (``rec.write_error``);
- the raw body of a tool that used `runner.sdk.http_request` is its HTTP body (``raw_io:
  true``, `runner.sdk.rawio`); otherwise the tool's return value as JSON text, or, for a
  value JSON cannot encode, its JSON form or repr with ``encoding`` (`runner.trace.jsonform`);
- a tool call that raised is recorded with ``error``, and the end line lists such calls in
  ``tool_errors`` (a run the agent carried on past them still ``succeeded``);
- the model id is read from the response body's ``model`` field, never from configuration;
- an exception that leaves the ``with`` block ends the run ``failed`` (exit code 1) with the
  failure of the call that raised it (or ``workflow``); it is never swallowed;
- clock readings are the machine's time (or the ``clock`` given) when each call starts, also
  installed as `runner.sdk.now`; while a tool call runs, every wall-clock read in its context
  (``time.time``, ``datetime.now``, ... `runner.sdk.wallclock`) returns that call's
  reading, so that ``reproduce``, which serves the same reading, sees what the tool saw.
  Entering a recorder installs the wall clock in the process once; outside recorded calls,
  and in threads a tool starts, reads stay the machine's.
- model calls made over httpx (the official SDKs) are recorded by `Recorder.http_client` /
  `Recorder.transport` clients and, with ``capture_httpx`` (the default), by every default
  httpx transport of the process while the recorder is active (`runner.sdk.httpxrecord`): a
  ``model`` call line with ``api``, the request body, ``http_status``, the raw response body
  (a stream's raw event stream) and the model id read from it (`runner.sdk.exchange`);
- the trace is redacted before it is written (``redaction``: `runner.trace.redact`): a secret
  found by a rule becomes the same keyed placeholder wherever it appears in the trace;
- nothing is exported to a tracing service: ``OPENAI_AGENTS_DISABLE_TRACING=1`` is set while
  recording and, from the first recording on, a request to a tracing-ingest path over httpx
  is answered in this process and never sent (listed in ``end.outbound`` as refused).
- the JSON-RPC traffic of an MCP stdio server the workflow names (``tools: [{mcp: {command:
  ...}}]``) and the agent starts while the recorder is active is recorded as ``sandbox-replay
  record`` records it (`runner.sdk.mcprecord`), taken off the server's pipes unchanged
  (`runner.sdk.mcpstdio`).
- the JSON-RPC traffic with an MCP server URL the workflow names (``tools: [{mcp: {url:
  ...}}]``) is recorded as ``sandbox-replay record`` records it (`runner.sdk.mcphttprecord`),
  the agent's bytes unchanged.
"""

import contextvars
import json
import os
import platform
import re
import secrets
import sys
import threading
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.sdk import current, mcphttprecord, mcprecord, sdktools, wallclock
from runner.sdk.agentcode import loaded_agent_code, sdk_versions
from runner.sdk.exchange import ModelCallRecording
from runner.sdk.exchange import error_class as _error_class
from runner.sdk.rawio import apply_exchanges, capture
from runner.trace.format import (
    TRACE_VERSION,
    encode_body,
    episode_exit_code,
    failure_signature,
    text_hash,
    tool_errors,
)
from runner.trace.jsonform import json_form
from runner.trace.modelapi import usage_tokens
from runner.trace.redact import Redactor
from runner.trace.redact_rules import load_rules

__all__ = ["IN_TOOL", "TRACING_ENV", "Recorder"]

TRACING_ENV = "OPENAI_AGENTS_DISABLE_TRACING"

# True while a recorded tool runs: the HTTP a tool makes is part of the tool's call (its value
# is its body), never a model call of its own.
IN_TOOL: "contextvars.ContextVar[bool]" = contextvars.ContextVar(
    "sandbox_replay_in_tool", default=False
)
# Active recorders with ``capture_httpx``, innermost last: the fallback of a bare thread.
_CAPTURING: List["Recorder"] = []
_CAPTURING_LOCK = threading.Lock()


def _capturing_recorder() -> Optional["Recorder"]:
    """The recorder that captures default-transport model calls in this context, or None."""
    if IN_TOOL.get():
        return None
    active = current.RECORDER.get()
    if isinstance(active, Recorder):
        return active if active.capture_httpx else None
    with _CAPTURING_LOCK:
        return _CAPTURING[-1] if _CAPTURING else None


def _safe_str(exc: BaseException) -> str:
    """``str(exc)``, or a note when the exception's ``__str__`` itself raises."""
    try:
        return str(exc)
    except Exception as inner:
        return "<{} whose str() raised {}>".format(type(exc).__name__, type(inner).__name__)


class Recorder(ModelCallRecording):
    """The context manager `runner.sdk.record` returns.

    Args:
        path: the trace file to write (its folder must exist).
        task_id: the run's task id (a path-safe id).
        task_input: the task input object.
        workflow: path of the workflow file this process runs, if any (its text and sha256
            go into the ``run`` line so that ``sandbox-replay reproduce`` can run it again).
            Its ``{mcp: {command: [...]}}`` entries are the MCP stdio servers whose traffic
            is recorded (`runner.sdk.mcprecord`).
        workflow_name, workflow_version: the run's workflow name and version (default: the
            workflow file's top-level ``name`` and ``version``, else ``adhoc`` and ``0``).
        seed: the run's seed.
        clock: a ``() -> epoch seconds`` source (default: the machine's clock,
            `runner.sdk.wallclock.real_time`).
        run_id: the run id (default ``rec-<UTC time>-<6 hex>``).
        capture_httpx: also record the model calls of httpx clients the SDKs made themselves
            (their default transports), not only those of `http_client` clients.
        redaction: the redaction rules (`runner.trace.redact_rules`): a rules document (dict),
            or the path of a JSON file holding one; None: the built-in detectors and header
            names. The trace is redacted when it is written (`runner.trace.redact`), under a
            key made for this trace and never stored.

    Raises:
        ValueError: an invalid ``task_id`` or redaction rules document (the field in brackets).
        OSError: the workflow file or the redaction rules file cannot be read.
    """

    def __init__(
        self,
        path: Any,
        task_id: str = "recorded",
        task_input: Optional[Dict[str, Any]] = None,
        workflow: Optional[str] = None,
        workflow_name: Optional[str] = None,
        workflow_version: Optional[str] = None,
        seed: int = 0,
        clock: Optional[Callable[[], float]] = None,
        run_id: Optional[str] = None,
        capture_httpx: bool = True,
        redaction: Any = None,
    ) -> None:
        if not task_id or any(c in task_id for c in "/\\") or task_id in (".", ".."):
            raise ValueError("task_id {!r} is not a path-safe id".format(task_id))
        self.path = os.fspath(path)
        self._redaction = load_rules(redaction)
        self.task_id = task_id
        self.task_input = dict(task_input or {})
        self.seed = seed
        self._clock = clock or wallclock.real_time
        self.run_id = run_id or "rec-{}-{}".format(
            time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), secrets.token_hex(3)
        )
        content = ""
        if workflow is not None:
            with open(workflow, encoding="utf-8") as handle:
                content = handle.read()
        self.workflow = {
            "name": workflow_name or _top_level(content, "name") or "adhoc",
            "version": workflow_version or _top_level(content, "version") or "0",
            "hash": text_hash(content),
            "content": content,
        }
        self.calls: List[Dict[str, Any]] = []
        self.tools: Dict[str, str] = {}
        self._failed: List[Tuple[BaseException, int, str]] = []
        self._lock = threading.Lock()
        self._start = 0.0
        self._reading = 0.0
        self._token: Any = None
        self.end: Optional[Dict[str, Any]] = None
        self.capture_httpx = capture_httpx
        self.active = False
        self._output: Any = None
        self._has_output = False
        ModelCallRecording.__init__(self)
        self._tracing_env: Optional[str] = None
        self.write_error: Optional[str] = None
        self._mcp: Any = None  # the MCP servers' calls (`runner.sdk.mcprecord`)
        self._mcp_http: Any = None  # runner.sdk.mcphttprecord's token while recording

    # -- the context -------------------------------------------------------------------------

    def __enter__(self) -> "Recorder":
        # first: what they warn is raised under warnings-as-errors, and then nothing of the
        # recording may be left set (found in review: the current recorder, tracing off)
        self._mcp = mcprecord.attach(self, self.workflow["content"], IN_TOOL.get)
        try:
            self._mcp_http = mcphttprecord.attach_recorder(self)  # its MCP server URLs
        except BaseException:
            mcprecord.detach(self._mcp)
            raise
        wallclock.install()
        self._start = self._clock()
        self._reading = self._start
        self._token = current.RECORDER.set(self)
        current.set_clock(lambda: self._reading)
        self._tracing_env = os.environ.get(TRACING_ENV)
        os.environ[TRACING_ENV] = "1"  # the OpenAI Agents SDK exports no trace of this run
        self.active = True
        if self.capture_httpx:
            with _CAPTURING_LOCK:
                _CAPTURING.append(self)
        from runner.sdk import httpxrecord  # only here: httpx is not needed otherwise

        httpxrecord.install_guard(_capturing_recorder)
        sdktools.install()  # the agent SDKs' tools are recorded like @tool calls
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        self._finish_pending()
        mcprecord.detach(self._mcp)
        mcphttprecord.detach_recorder(self._mcp_http)
        self.active = False
        with _CAPTURING_LOCK:
            if self in _CAPTURING:
                _CAPTURING.remove(self)
        if self._tracing_env is None:
            os.environ.pop(TRACING_ENV, None)
        else:
            os.environ[TRACING_ENV] = self._tracing_env
        current.RECORDER.reset(self._token)
        current.set_clock(None)
        status = "succeeded" if exc is None else "failed"
        exit_code = episode_exit_code(status)
        end: Dict[str, Any] = {
            "v": TRACE_VERSION,
            "type": "end",
            "status": status,
            "exit_code": exit_code,
            "failure": None,
            "failure_signature": None,
            "not_run": [],
            "outbound": list(self.outbound),
        }
        if self.outbound_dropped:
            end["outbound_dropped"] = self.outbound_dropped
        if self._has_output:
            end["output"] = self._output
        if exc is not None:
            index, tool = len(self.calls) - 1, "workflow"
            for error, call_index, call_tool in reversed(self._failed):
                if error is exc:
                    index, tool = call_index, call_tool
                    break
            error_class = _error_class(exc)
            end["failure"] = {
                "call_index": index,
                "tool": tool,
                "error_class": error_class,
                "exit_code": exit_code,
            }
            end["failure_signature"] = failure_signature(index, tool, error_class, exit_code)
            end["error"] = {"class": error_class, "message": str(exc)[:4096]}
        errors = tool_errors(self.calls)
        if errors is not None:
            end["tool_errors"] = errors
        models = [c for c in self.calls if c["tool"] in ("model", "user")]
        tokens = [usage_tokens(c.get("usage")) for c in models]
        end["meter"] = {
            "tokens_in": sum(t[0] for t in tokens),
            "tokens_out": sum(t[1] for t in tokens),
            "model_calls": len(models),
            "usd": 0.0,
            "sandbox_s": 0.0,
        }
        self.end = end
        try:
            self._write()
        except Exception as error:  # the agent's own outcome stands; the recorder says why
            self.write_error = "{}: {}".format(type(error).__name__, _safe_str(error))
            warnings.warn(
                "runner.sdk.record could not write {}: {}".format(self.path, self.write_error),
                RuntimeWarning,
                stacklevel=2,
            )

    # -- calls -------------------------------------------------------------------------------

    def _next(self) -> Tuple[int, float]:
        with self._lock:
            index = len(self.calls)
            self._reading = float(self._clock())
            placeholder: Dict[str, Any] = {"index": index, "tool": "workflow"}
            self.calls.append(placeholder)
            return index, self._reading

    def call_tool(
        self, definition: Any, func: Callable[..., Any], args: Any, kwargs: Dict[str, Any]
    ) -> Any:
        """Run one tool call for real and record it (called by the SDK's tool wrapper)."""
        index, reading = self._next()
        self.tools[definition.id] = definition.schema_hash
        call_args = dict(kwargs)
        if args:
            names = list(definition.schema.get("properties", {}))
            call_args.update({n: v for n, v in zip(names, args)})
        record: Dict[str, Any] = {
            "v": TRACE_VERSION,
            "type": "call",
            "index": index,
            "tool": definition.id,
            "effect": definition.effect.value,
            "args": call_args,
            "schema_hash": definition.schema_hash,
            "clock": reading,
            "source": "executed",
            "raw_io": False,
        }
        framework = getattr(definition, "framework", None)
        if framework is not None:  # an agent SDK's tool (runner.sdk.sdktools)
            record["meta"] = {
                "sdk": {
                    "framework": framework,
                    "name": definition.name,
                    "effect_declared": bool(definition.effect_declared),
                }
            }
        started = time.monotonic()
        token = current.RECORDER.set(None)  # a tool calling another tool: recorded once, outside
        in_tool = IN_TOOL.set(True)
        try:
            with capture() as exchanges, wallclock.frozen(reading):
                try:
                    value = func(*args, **kwargs)
                except BaseException as exc:
                    self._keep(record, self._tool_failed, exchanges, exc, index)
                    raise
            self._keep(record, self._tool_value, exchanges, value)
            return value
        finally:
            IN_TOOL.reset(in_tool)
            current.RECORDER.reset(token)
            record["duration_s"] = round(time.monotonic() - started, 6)
            self.calls[index] = record

    def _tool_failed(
        self, record: Dict[str, Any], exchanges: Any, exc: BaseException, index: int
    ) -> None:
        if exchanges:
            apply_exchanges(record, exchanges, None)
        self._failed.append((exc, index, record["tool"]))
        record["error"] = {"class": _error_class(exc), "message": _safe_str(exc)[:4096]}

    @staticmethod
    def _tool_value(record: Dict[str, Any], exchanges: Any, value: Any) -> None:
        text, encoding = json_form(value)
        if encoding is not None:
            record["encoding"] = encoding
        if exchanges:
            apply_exchanges(record, exchanges, text)
        else:
            record.update(encode_body(text))

    @staticmethod
    def _keep(record: Dict[str, Any], step: Callable[..., None], *args: Any) -> None:
        """Run one recording step; a failure of the recorder is noted, never raised.

        The recorder must not change the agent (issue 27): whatever goes wrong while a call is
        being recorded (an exception's ``__str__`` that raises, an exchange that does not
        encode) leaves the call line without its body and with ``meta.recorder_error``, which
        ``lint`` reports as a missing body; the tool's value or exception reaches the agent
        untouched.
        """
        try:
            step(record, *args)
        except Exception as exc:
            note = "{}: {}".format(type(exc).__name__, _safe_str(exc))
            record.setdefault("meta", {})["recorder_error"] = note[:4096]

    def model(self, request: Dict[str, Any], body: Any, role: str = "model") -> Dict[str, Any]:
        """Record one model (or simulated-user) turn: its request and raw HTTP response body.

        Args:
            request: the Chat Completions request sent.
            body: the provider's raw response body (bytes or text), exactly as received.
            role: ``model`` or ``user``.

        Returns:
            The parsed response body (a dict when it is a JSON object, else ``{}``).
        """
        if role not in ("model", "user"):
            raise ValueError("role must be 'model' or 'user', not {!r}".format(role))
        index, reading = self._next()
        record: Dict[str, Any] = {
            "v": TRACE_VERSION,
            "type": "call",
            "index": index,
            "tool": role,
            "request": dict(request),
            "clock": reading,
            "duration_s": 0.0,
            "source": "provider",
            "raw_io": True,
        }
        record.update(encode_body(body))
        raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        try:
            parsed = json.loads(raw.decode("utf-8"))
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            if isinstance(parsed.get("model"), str):
                record["model"] = parsed["model"]
                record["model_source"] = "response"
            if isinstance(parsed.get("usage"), dict):
                record["usage"] = parsed["usage"]
        self.calls[index] = record
        return parsed if isinstance(parsed, dict) else {}

    def set_output(self, value: Any) -> None:
        """Record the run's output (the end line's ``output``). Never raises.

        `sandbox-replay tasks extract` makes it the task's expected output. A value JSON
        cannot encode is kept as its JSON form (a pydantic model's ``model_dump(mode="json")``,
        a dataclass's fields), else as the text of its ``repr``
        (`runner.trace.jsonform.json_form`).
        """
        text, _encoding = json_form(value)
        self._output, self._has_output = json.loads(text), True

    def user(self, request: Dict[str, Any], body: Any) -> Dict[str, Any]:
        """Record one simulated-user turn (see `model`)."""
        return self.model(request, body, role="user")

    # -- writing -----------------------------------------------------------------------------

    def _run_line(self) -> Dict[str, Any]:
        libc, version = platform.libc_ver()
        agent = loaded_agent_code(self.workflow["content"])  # what ran: the diff names changes
        return {
            "v": TRACE_VERSION,
            "type": "run",
            "run_id": self.run_id,
            "task_id": self.task_id,
            "task_input": self.task_input,
            "workflow": self.workflow,
            "purpose": "live",
            "mode": "record",
            "backend": "process",
            "clock": {"start": self._start, "step_s": 0.0},
            "seed": self.seed,
            "environment": {
                "python": ".".join(str(v) for v in sys.version_info[:3]),
                "platform": "-".join(
                    p for p in (sys.platform, platform.machine(), libc + version) if p
                ),
                "packages": sdk_versions(),
                "image": None,
                "image_id": None,
                "tools": dict(sorted(self.tools.items())),
                "policy_hash": None,
                **({"agent_code": agent} if agent else {}),
            },
        }

    def _write(self) -> None:
        assert self.end is not None  # set by __exit__, which writes
        lines = Redactor(self._redaction).redact_all([self._run_line(), *self.calls, self.end])
        part = self.path + ".part"
        with open(part, "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
                handle.write("\n")
        os.replace(part, self.path)


_TOP_LEVEL = (
    r"^{}:[ \t]*"  # a top-level key, then a double-quoted, single-quoted or plain scalar
    r"(?:\"([^\"\n]{{1,200}})\"|'([^'\n]{{1,200}})'|([^\s#\"'][^#\n]{{0,199}}?))"
    r"[ \t]*(?:#.*)?$"
)


def _top_level(content: str, key: str) -> Optional[str]:
    """A top-level scalar ``key: value`` of a workflow file's YAML text, read without YAML.

    The recorder names the run's workflow by the file's own ``name`` and ``version`` (a new
    user's finding: a recording with ``workflow="stdio.yaml"`` said ``adhoc@0``); a value
    this simple reading does not find leaves the default (standard library only: no PyYAML
    here for a line the file almost always writes plainly).
    """
    found = re.search(_TOP_LEVEL.format(re.escape(key)), content, re.MULTILINE)
    if found is None:
        return None
    value = next(group for group in found.groups() if group is not None).strip()
    return value or None
