"""Every tool and model call of an episode goes through `Caller`: index, clock, record.

Standard library only, Python 3.9+. For each call the caller advances the injected clock,
executes or serves it, and sends one ``call`` message carrying the trace call record of
docs/internals.md: ``index`` (0-based over every call), ``step_id``, ``tool`` (or ``model`` /
``user``), ``effect``, ``args`` or ``request``, the body fields of
`runner.trace.format.encode_body`, ``schema_hash``, ``model``, ``clock``, ``duration_s``,
``source`` (``executed`` | ``observation`` | ``trace`` | ``provider``), ``raw_io`` and, for a
failed call, ``error: {class, message}``. Errors are recorded first, then raised to the caller.

Serving (see `runner.runtime.replay.recordings`): in ``shadow`` mode ``recorded`` tools are served
from the task's observations; in ``reproduce`` mode, and for the calls before ``fork_at`` of an
anchored fork (a shadow run whose first ``fork_at`` calls are a trace's prefix), from the trace
by position, and ``pure``
tools execute and their body is compared with the recorded one (a mismatch, or a call the
trace never saw, is noted in the record's ``meta.divergence``; the executed result is used, so
the episode goes on). A served call with no recording fails with `UnrecordedCall` and carries
the same note (nearest recorded call, differing fields). Model and simulated-user turns are
always answered by the host (``model_request``).

Anchored fork: a prefix call that differs from its recording (a divergence note, another
tool or role than the trace has at that index, an error where the recording has none or the
reverse) breaks the prefix; from then on every call at or past ``fork_at`` fails at once with
`ForkStopped` (nothing is executed, served or asked of the host): the fork does not continue
from a state that is not the recorded one.

Threads: a program step's calls may come from several threads at once. Indices are handed out
under a lock and records sent in index order (a record waits for every earlier index;
`Caller.flush` sends what still waits at the end), so the trace stays strictly increasing.

Where a tool runs: in the worker process (`runner.runtime.worker`, the ``execute`` argument);
the record is built here from what came back. Clock: `runner.runtime.replay.clock.Clock`.
"""

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.errors import ReplayDivergence
from runner.runtime.registry import RuntimeTool
from runner.runtime.replay import rawserve
from runner.runtime.replay.callrecords import (
    body_text,
    brief,
    message_of,
    raw_body,
    safe_tool_id,
    same_body,
    same_text,
)
from runner.runtime.replay.clock import Clock
from runner.runtime.replay.recordings import (
    ObservationStore,
    TraceStore,
    differing_fields,
    value_of,
)
from runner.sdk import rawio
from runner.trace.excerpt import differing_excerpts
from runner.trace.format import TRACE_VERSION, encode_body
from runner.wire import argrules
from runner.wire.errors import ModelCallError, PureResultMismatch, error_record

_BODY_KEYS = (*rawio.BODY_KEYS, "content_encoding")
Send = Callable[..., None]
# (tool, args, the call record being built, the raw record to serve again or None) -> value
Execute = Callable[[RuntimeTool, Dict[str, Any], Dict[str, Any], Optional[Dict[str, Any]]], Any]
Wait = Callable[[str], Dict[str, Any]]


class ForkStopped(ReplayDivergence):
    """A call past an anchored fork's point after its prefix diverged: the fork stops here."""


class Caller:
    """Makes the episode's calls and reports each one.

    Args:
        send: ``send(type, **fields)`` of the channel.
        request_model: sends a ``model_request`` and returns the matching ``model_response``.
        mode: ``shadow`` or ``reproduce``.
        observations: the task's observations (shadow).
        trace: the trace's call records (reproduce).
        clock: the injected clock.
        after_call: run after each call, before its record is sent (forwards child egress).
        request_api: sends a ``gateway_request`` and returns the matching
            ``gateway_response`` (program steps; `runner.runtime.steps.apicall`).
        execute: runs a tool and fills the record's body (the worker's, `runner.runtime.worker.
            client.Worker.execute`); default `runner.runtime.replay.rawserve.run_here`.
        fork_at: an anchored fork (shadow mode): calls ``0 .. fork_at - 1`` are the trace's
            prefix, served and verified as in reproduce; None: no fork.
    """

    def __init__(
        self,
        send: Send,
        request_model: Callable[[Dict[str, Any]], Dict[str, Any]],
        mode: str,
        observations: ObservationStore,
        trace: TraceStore,
        clock: Clock,
        after_call: Callable[[], None] = lambda: None,
        request_api: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
        execute: Optional[Execute] = None,
        fork_at: Optional[int] = None,
    ) -> None:
        self._run = execute or rawserve.run_here
        self.fork_at = fork_at
        self.prefix_broken = False
        self._send = send
        self.request_api = request_api
        self._request_model = request_model
        self.mode = mode
        self._observations = observations
        self._trace = trace
        self.clock = clock
        self._after_call = after_call
        self.index = 0
        self.failed: List[Tuple[BaseException, int, str]] = []
        self.divergences = 0
        self.served_text: Optional[str] = None
        self._lock = threading.Lock()
        self._pending: Dict[int, Dict[str, Any]] = {}
        self._sent = 0

    def from_trace(self, index: int) -> bool:
        """True when call ``index`` is served and verified from the trace (reproduce, prefix)."""
        return self.mode == "reproduce" or (self.fork_at is not None and index < self.fork_at)

    def _next(self) -> Tuple[int, float]:
        with self._lock:
            index = self.index
            if self.prefix_broken and self.fork_at is not None and index >= self.fork_at:
                raise ForkStopped(
                    "the anchored fork does not continue: its prefix (calls 0-{}) diverged from "
                    "the recording".format(self.fork_at - 1)
                )
            self.index += 1
            return index, self.clock.advance(index)

    def _finish(
        self, record: Dict[str, Any], started: float, error: Optional[BaseException]
    ) -> None:
        record["duration_s"] = round(time.monotonic() - started, 6)
        if error is not None:
            record["error"] = error_record(error)
            self.failed.append((error, record["index"], record["tool"]))
        if self.fork_at is not None and record["index"] < self.fork_at:
            self._check_prefix(record)
        self._after_call()
        with self._lock:
            self._pending[record["index"]] = record
            while self._sent in self._pending:
                self._send("call", record=self._pending.pop(self._sent))
                self._sent += 1

    def _check_prefix(self, record: Dict[str, Any]) -> None:
        """Mark the fork's prefix broken when call ``record`` is not its recording's."""
        recorded = self._trace.at(record["index"])
        if (record.get("meta") or {}).get("divergence"):
            pass  # already said (a served call's miss, a pure result)
        elif recorded is None or recorded.get("tool") != record["tool"]:
            self.divergence(
                record,
                "unrecorded_call",
                "{} call #{} of the fork's prefix where the trace has {}".format(
                    record["tool"],
                    record["index"],
                    "no call" if recorded is None else repr(recorded.get("tool")),
                ),
            )
        elif bool(record.get("error")) != bool(recorded.get("error")):
            self.divergence(
                record,
                "prefix_outcome",
                "{} call #{} of the fork's prefix {} but the trace recorded {}".format(
                    record["tool"],
                    record["index"],
                    "failed: " + brief(record) if record.get("error") else "succeeded",
                    brief(recorded) if recorded.get("error") else "a success",
                ),
            )
        if (record.get("meta") or {}).get("divergence"):
            self.prefix_broken = True

    def flush(self) -> None:
        """Send the records still waiting for an earlier call that never ended, in order."""
        with self._lock:
            for index in sorted(self._pending):
                self._send("call", record=self._pending.pop(index))
            self._sent = self.index

    def divergence(self, record: Dict[str, Any], kind: str, message: str, **fields: Any) -> None:
        """Annotate ``record`` with a difference from the recording; execution goes on.

        The note ``{kind, index, tool, message, ...}`` is sent at once as a ``divergence``
        message (the host lists them in the trace's end line) and kept in the call record's
        ``meta.divergence``; the call's own fields (error, body) are what reproduce compares.
        """
        self.divergences += 1
        note = {"kind": kind, "index": record["index"], "tool": record["tool"], "message": message}
        note.update({k: v for k, v in fields.items() if v is not None})
        record.setdefault("meta", {}).setdefault("divergence", []).append(note)
        self._send("divergence", **note)

    def call_tool(
        self,
        step_id: str,
        tool: RuntimeTool,
        args: Any,
        execute: Optional[Execute] = None,
        meta: Optional[Dict[str, Any]] = None,
    ) -> Any:
        """Execute or serve one tool call and report it.

        ``execute``, when given, runs this call instead of the caller's executor (an MCP
        server's request, forwarded by `runner.runtime.mcphub`); it fills the record's body as
        the executor does. ``meta`` is put in the record's ``meta`` (``{"mcp": ...}``).

        Returns:
            The tool's return value (served values are the recorded body parsed as JSON).
            After a served call whose recording has a text body (a value or an error's
            text), ``served_text`` holds that body verbatim, the tool message a model sees;
            otherwise it is None.

        Raises:
            Exception: whatever the call raised (tool errors, `UnrecordedCall`,
                `RecordedError` carrying the recorded class, `CapabilityDenied`), after the
                call record was sent.
        """
        self.served_text = None
        index, reading = self._next()
        record: Dict[str, Any] = {
            "v": TRACE_VERSION,
            "type": "call",
            "index": index,
            "step_id": step_id,
            "tool": tool.id,
            "effect": tool.effect,
            "args": args if isinstance(args, dict) else {},
            "schema_hash": tool.schema_hash,
            "clock": reading,
            "raw_io": False,
        }
        if not isinstance(args, dict):
            record["meta"] = {"arguments": args}
        if meta:
            record.setdefault("meta", {}).update(meta)
        started = time.monotonic()
        error: Optional[BaseException] = None
        value: Any = None
        try:
            argrules.guard(tool.rules, tool.id, args, record)  # the policy's argument rules
            if tool.disposition == "execute":
                record["source"] = "executed"
                value = self._execute(index, step_id, tool, args, record, execute)
            else:
                served = self._serve(record, tool.id, args)
                record["source"] = "trace" if self.from_trace(index) else "observation"
                if self.from_trace(index) and rawio.is_raw(served):
                    value = self._rerun_raw(tool, args, record, served)
                else:
                    record.update({k: served[k] for k in _BODY_KEYS if k in served})
                    self.served_text = body_text(served)
                    value = value_of(served)
        except (Exception, SystemExit) as exc:  # a tool's sys.exit() is a tool error too
            error = exc
        if self.from_trace(index) and tool.disposition == "execute":
            self._compare_pure(index, tool, args, record, error)
        self._finish(record, started, error)
        if error is not None:
            raise error
        return value

    def _execute(
        self,
        index: int,
        step_id: str,
        tool: RuntimeTool,
        args: Any,
        record: Dict[str, Any],
        execute: Optional[Execute] = None,
    ) -> Any:
        if not isinstance(args, dict):
            kind = type(args).__name__
            raise TypeError("tool {!r} takes keyword arguments, not {}".format(tool.id, kind))
        return (execute or self._run)(tool, args, record, None)

    def _rerun_raw(
        self, tool: RuntimeTool, args: Any, record: Dict[str, Any], served: Dict[str, Any]
    ) -> Any:
        """Serve a raw I/O recording (`runner.sdk.rawio`): run the code again or the value.

        A ``pure``/``read`` tool with code runs with its HTTP requests answered from the
        recording; a result other than the recorded ``meta.result`` is a ``raw_io_result``
        divergence (the tool's parsing changed). Other tools get the recorded value.
        """
        if tool.func is None or tool.effect not in rawio.RERUN_EFFECTS:
            tool_level = rawio.tool_level_record(served)
            record.update({k: tool_level[k] for k in _BODY_KEYS if k in tool_level})
            return value_of(tool_level)
        if not isinstance(args, dict):
            raise TypeError("tool {!r} takes keyword arguments".format(tool.id))
        value = self._run(tool, args, record, served)
        recorded_text = rawio.result_text(served)
        now_text = rawio.result_text(record) or ""
        if isinstance(served.get("error"), dict) or (
            recorded_text is not None and not same_text(recorded_text, now_text)
        ):
            error = served.get("error")
            self.divergence(
                record,
                "raw_io_result",
                "tool {!r} #{} parsed its recorded HTTP body into {} but the trace recorded "
                "{}".format(
                    tool.id,
                    record["index"],
                    differing_excerpts(now_text, recorded_text or "", 120)[0],
                    "error {}".format(error.get("class"))
                    if isinstance(error, dict)
                    else differing_excerpts(now_text, recorded_text or "", 120)[1],
                ),
                args=args,
            )
        return value

    def _compare_pure(
        self,
        index: int,
        tool: RuntimeTool,
        args: Any,
        record: Dict[str, Any],
        error: Optional[BaseException],
    ) -> None:
        recorded = self._trace.at(index)
        if recorded is None or recorded.get("tool") != tool.id:
            self.divergence(
                record,
                "unrecorded_call",
                "pure tool {!r} called at #{} where the trace has {}".format(
                    tool.id,
                    index,
                    "no call" if recorded is None else "tool {!r}".format(recorded.get("tool")),
                ),
                args=args,
            )
            return
        differing = differing_fields(args, recorded.get("args", {}))
        if differing:
            self.divergence(
                record,
                "arguments",
                "pure tool {!r} #{}: arguments differ from the recording: {}".format(
                    tool.id, index, "; ".join(differing)
                ),
                args=args,
                differing=differing,
            )
        if error is not None:
            now = {"error": error_record(error)}
            same = (recorded.get("error") or {}).get("class") == now["error"]["class"]
        else:
            now = record
            same = recorded.get("error") is None and same_body(recorded, record)
        if not same:
            shown = (brief(now), brief(recorded))
            if error is None and recorded.get("error") is None:  # two bodies: cut around
                shown = differing_excerpts(str(now.get("body")), str(recorded.get("body")), 120)
            mismatch = PureResultMismatch(
                "pure tool {!r} #{} {} but the trace recorded {}".format(
                    tool.id,
                    index,
                    ("raised " if error is not None else "returned ") + shown[0],
                    shown[1],
                ),
                tool_id=tool.id,
                index=index,
            )
            self.divergence(
                record,
                "pure_result",
                mismatch.message,
                args=args,
                recorded={k: recorded[k] for k in (*_BODY_KEYS, "error") if k in recorded},
            )

    def _serve(self, record: Dict[str, Any], tool_id: str, args: Any) -> Dict[str, Any]:
        try:
            if self.from_trace(record["index"]):
                return self._trace.serve(record["index"], tool_id, args)
            return self._observations.serve(tool_id, args)
        except Exception as exc:
            fields = getattr(exc, "fields", {})
            self.divergence(
                record,
                "unrecorded_call",
                str(exc),
                args=args,
                nearest=fields.get("nearest"),
                differing=fields.get("differing"),
            )
            raise

    def record_failed(self, step_id: str, tool_id: str, args: Any, error: BaseException) -> None:
        """Record a tool call that could not even start (unknown name, unparseable args)."""
        index, reading = self._next()
        record = {
            "v": TRACE_VERSION,
            "type": "call",
            "index": index,
            "step_id": step_id,
            "tool": safe_tool_id(tool_id),
            "effect": None,
            "args": args if isinstance(args, dict) else {},
            "clock": reading,
            "source": "executed",
            "raw_io": False,
        }
        meta: Dict[str, Any] = {}
        if record["tool"] != tool_id:
            meta["requested_tool"] = tool_id[:1024]
        if not isinstance(args, dict):
            meta["arguments"] = args if isinstance(args, (str, type(None))) else repr(args)
        if meta:
            record["meta"] = meta
        self._finish(record, time.monotonic(), error)

    def call_model(self, step_id: str, role: str, request: Dict[str, Any]) -> Dict[str, Any]:
        """Ask the host for one model (``role="model"``) or simulated-user turn.

        Returns:
            ``choices[0].message`` of the chat completion in the raw response body.

        Raises:
            ModelCallError: the host answered with an error, or the body is not a chat
                completion with a message (recorded first).
        """
        index, reading = self._next()
        record: Dict[str, Any] = {
            "v": TRACE_VERSION,
            "type": "call",
            "index": index,
            "step_id": step_id,
            "tool": role,
            "request": request,
            "clock": reading,
        }
        started = time.monotonic()
        error: Optional[BaseException] = None
        message: Dict[str, Any] = {}
        try:
            response = self._request_model(
                {"role": role, "request": request, "index": index, "step_id": step_id}
            )
            record["source"] = str(response.get("source") or "provider")
            raw = raw_body(response)
            if raw is not None:
                record.update(encode_body(raw))
            for key in ("model", "usage"):
                if response.get(key) is not None:
                    record[key] = response[key]
            remote = response.get("error")
            if remote:
                remote = remote if isinstance(remote, dict) else {"message": str(remote)}
                raise ModelCallError(
                    "{} turn failed on the host: {}".format(role, remote.get("message", "")),
                    remote_class=remote.get("class"),
                )
            message = message_of(raw, role)
            if isinstance(message.get("_model"), str):
                record["model"] = message["_model"]
                record["model_source"] = "response"
            message.pop("_model", None)
        except Exception as exc:
            error = exc
        self._finish(record, started, error)
        if error is not None:
            raise error
        return message
