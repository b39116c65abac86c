"""The runtime's end of the worker: send it work, believe only what the pipe allows.

Standard library only, Python 3.9+. `Worker.spawn` starts the worker before any run data
arrives (`runner.runtime.worker.spawn.start`: a fork of the runtime, or a fresh interpreter; in
a session of its own, holding no descriptor of the host channel) and serves the egress
witness's bootstrap when it is asked for. `Worker.pid` is its pid (the egress witness's hook
point is in the worker, `runner.runtime.worker.process.before_user_code`; the runtime side reads
what it needs with this pid).

Everything that comes back is checked (`runner.runtime.worker.wire`); a line that is not an
answer the runtime is waiting for (a forged ``call`` or ``episode``, an unparseable or
over-long line, a reply to nothing) is a violation: it is not believed, the request in progress
fails at once with `WorkerProtocolError` naming it, the worker gets no more work, and the
episode fails naming it (`check`, also run after every step). A worker that exits or closes its
pipe fails the call in progress with `WorkerGone`.
"""

import itertools
import socket
import threading
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Optional

from runner.runtime.channel import Channel
from runner.runtime.egress import audit, witness
from runner.runtime.pid1 import Reaper
from runner.runtime.registry import RuntimeTool
from runner.runtime.replay.callrecords import to_json_text
from runner.runtime.worker import spawn, wire
from runner.sdk import rawio
from runner.trace.format import encode_body
from runner.trace.jsonform import ENCODINGS
from runner.trace.strictjson import loads as strict_loads
from runner.wire import observed

if TYPE_CHECKING:
    import subprocess

__all__ = ["MAX_VIOLATIONS", "Worker"]

MAX_VIOLATIONS = 20  # the first ones are named; the rest only counted


class Worker:
    """The worker process as the runtime sees it.

    Args:
        reaper: waits for the worker's exit (the runtime, as PID 1, reaps every child).
    """

    def __init__(self, reaper: Reaper) -> None:
        self.reaper = reaper
        self.pid: Optional[int] = None
        self.pipe: Optional[Channel] = None
        self.gone = False
        self.violations: List[str] = []
        self.violation_count = 0
        self.programs: Dict[str, Any] = {}  # step id -> the running `ProgramStep`
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._process: Optional["subprocess.Popen[bytes]"] = None
        self.witness: Optional[witness.Witness] = None
        self._witness_coverage: Optional[Dict[str, Any]] = None
        self._bootstrap: Optional[threading.Thread] = None
        # the nondeterminism report (reproduce): (kind, what) -> the worker's latest entry
        self.observations: Dict[Any, Dict[str, Any]] = {}
        self.observations_dropped = 0

    # --- life ---------------------------------------------------------------------------------

    def spawn(self) -> int:
        """Start the worker (`runner.runtime.worker.spawn.start`); return its pid."""
        started = spawn.start()
        self._process = started.process
        if started.bootstrap is not None:
            self._bootstrap = threading.Thread(
                target=self._serve_witness,
                args=(started.pid, started.bootstrap),
                name="egress-bootstrap",
            )
            self._bootstrap.start()
        else:
            self._witness_coverage = started.coverage
        self.pid = started.pid
        self.reaper.watch(started.pid, self._process)
        self.pipe = Channel(
            started.read_fd,
            started.write_fd,
            exit=self._gone,
            on_message=self._on_message,
            on_invalid=self._violation,
            max_bytes=wire.MAX_PIPE_BYTES,
            max_inbound=wire.MAX_PIPE_BYTES + 4096,
        )
        self.pipe.start_reader()
        return started.pid

    def _serve_witness(self, pid: int, channel: socket.socket) -> None:
        try:
            found, coverage = witness.serve(pid, channel.fileno(), None, audit.record_witnessed)
        finally:
            channel.close()
        self.witness, self._witness_coverage = found, coverage

    def witness_coverage(self) -> Optional[Dict[str, Any]]:
        """Wait for the witness's bootstrap; the ``coverage`` message to send without it.

        None when the runtime now witnesses every network call of the worker's tree (the
        outbound log's coverage can be ``full``); else the ``partial`` message with the reason
        (`runner.runtime.egress.witness.serve`).
        """
        if self._bootstrap is not None:
            self._bootstrap.join()
        return self._witness_coverage

    def set_gateway_port(self, port: int) -> None:
        """Let the worker's connects to the model gateway's loopback ``port`` through."""
        if self.witness is not None:
            self.witness.gateway_port = port

    def _gone(self, _code: int) -> None:
        self.gone = True
        if self.pipe is not None:
            self.pipe.closed = True
            self.pipe.fail_waiters({"gone": True})

    def exit_code(self, timeout_s: float = 1.0) -> Optional[int]:
        """The worker's exit code once it exited (negative: the signal), else None."""
        return None if self.pid is None else self.reaper.wait(self.pid, timeout_s)

    # --- what the worker may send -------------------------------------------------------------

    def _violation(self, what: str) -> None:
        """Note a line that is not believed; fail what is waiting (the worker is not trusted)."""
        with self._lock:
            self.violation_count += 1
            if len(self.violations) < MAX_VIOLATIONS:
                self.violations.append(what[:300])
        if self.pipe is not None:
            self.pipe.fail_waiters({"violation": True})

    def _on_message(self, message: Dict[str, Any]) -> None:
        if message["type"] == "tool" and isinstance(message.get("id"), str):
            threading.Thread(target=self._tool_call, args=(message,), daemon=True).start()
            return
        self._violation("a {!r} line that answers nothing".format(message["type"][:40]))

    def check(self) -> None:
        """Raise `WorkerProtocolError` when the worker broke the pipe's rules so far.

        Raises:
            WorkerProtocolError: naming the first violations and their count.
        """
        with self._lock:
            if not self.violation_count:
                return
            named, count = list(self.violations), self.violation_count
        raise wire.WorkerProtocolError(
            "the worker sent {} line(s) the runtime does not accept (not believed): {}".format(
                count, "; ".join(named)
            )
        )

    def _tool_call(self, message: Dict[str, Any]) -> None:
        """A program's ``@tool`` call: the declared toolset and the caller decide (here)."""
        answer: Dict[str, Any] = {"type": "tool_result", "id": message["id"]}
        step = self.programs.get(str(message.get("step_id")))
        try:
            tool_id = message.get("tool")
            if step is None or not isinstance(tool_id, str):
                self._violation("a 'tool' call outside a running program step")
                raise wire.WorkerProtocolError("no program step is running to call tools")
            answer["text"] = to_json_text(step.call(tool_id, message.get("args")))
            answer["clock"] = step.caller.clock()
        except Exception as exc:
            answer["error"] = wire.error_fields(exc)
        assert self.pipe is not None
        try:
            self.pipe.send_raw(answer)
        except ValueError as exc:
            self.pipe.send_raw(
                {"type": "tool_result", "id": message["id"], "error": wire.error_fields(exc)}
            )

    def _take_observed(self, found: Any) -> None:
        """Keep the worker's ``observed`` entries (`runner.runtime.nondeterminism.drain`).

        Only well-formed entries of the known kinds, their strings cut, at most
        `runner.wire.observed.MAX_ENTRIES` of them: the worker runs the user's code, so this
        is only what it says.
        """
        if not isinstance(found, dict):
            return
        dropped = found.get("dropped")
        if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped >= 0:
            self.observations_dropped = max(self.observations_dropped, dropped)
        entries = found.get("entries")
        for entry in entries if isinstance(entries, list) else []:
            kept = observed.entry(entry)
            if kept is None:
                continue
            key = (kept["kind"], kept["what"])
            if key in self.observations or len(self.observations) < observed.MAX_ENTRIES:
                self.observations[key] = kept
            else:
                self.observations_dropped += 1

    def nondeterminism(self) -> Dict[str, Any]:
        """``{"entries": [...], "dropped": n}``: what the worker reported, in first-seen order."""
        return {"entries": list(self.observations.values()), "dropped": self.observations_dropped}

    # --- requests -----------------------------------------------------------------------------

    def _request(self, type_: str, reply: str, **fields: Any) -> Dict[str, Any]:
        self.check()  # a worker that broke the rules gets no more work
        if self.pipe is None or self.gone:
            raise wire.WorkerGone("the worker is not running")
        message_id = "w{}".format(next(self._ids))
        answer = self.pipe.request(type_, reply, message_id, **fields)
        self._take_observed(answer.pop("observed", None))
        if answer.get("violation"):
            self.check()
        if answer.get("gone"):
            code = self.exit_code()
            raise wire.WorkerGone(
                "the worker exited (code {}) or closed its pipe before answering {!r}".format(
                    code, type_
                )
            )
        return answer

    def load(
        self,
        manifest: Any,
        mode: str,
        tool_paths: Any,
        modules: Any,
        environment: Optional[Dict[str, str]] = None,
        clock: Optional[float] = None,
    ) -> FrozenSet[str]:
        """Have the worker import the tool modules; return the ids it has code for.

        Args:
            manifest: the parsed ``manifest.json``.
            mode: the run's mode.
            tool_paths: folders the worker puts first on ``sys.path``.
            modules: the tool modules it imports.
            environment: variables the worker sets first (the model gateway's for the SDKs).
            clock: the run's clock reading its wall clock is frozen at while modules import.

        Raises:
            Exception: the worker's error (a module that does not import: its class and text).
        """
        answer = self._request(
            "load",
            "loaded",
            manifest=manifest,
            mode=mode,
            tool_paths=tool_paths,
            modules=modules,
            environment=environment or {},
            clock=clock,
        )
        if answer.get("error") is not None:
            raise wire.error_of(answer["error"])
        code = answer.get("code")
        if not isinstance(code, list) or not all(isinstance(c, str) for c in code):
            raise wire.WorkerProtocolError("'loaded' needs 'code': a list of tool ids")
        return frozenset(code)

    def describe(self, spec: Dict[str, Any]) -> Dict[str, Any]:
        """The ``manifest`` message's fields (mode ``manifest``), described by the worker."""
        answer = self._request("manifest", "described", spec=spec)
        if answer.get("error") is not None:
            raise wire.error_of(answer["error"])
        fields = answer.get("fields")
        if not isinstance(fields, dict):
            raise wire.WorkerProtocolError("'described' needs 'fields': an object")
        return fields

    def execute(
        self,
        tool: RuntimeTool,
        args: Dict[str, Any],
        record: Dict[str, Any],
        served: Optional[Dict[str, Any]],
    ) -> Any:
        """Run ``tool`` in the worker; fill ``record``'s body from its answer; return the value.

        The `runner.runtime.replay.calls.Caller` ``execute`` hook: the record is this side's.
        """
        answer = self._request(
            "call", "result", tool=tool.id, args=args, clock=record.get("clock"), serve=served
        )
        try:
            text, exchanges = wire.result_of(answer)
        except Exception as exc:
            seen = getattr(exc, "exchanges", None)
            if seen:
                rawio.apply_exchanges(record, seen, None)
            raise
        try:
            value = strict_loads(text)
        except ValueError as exc:
            raise wire.WorkerProtocolError("a result's text is not JSON: {}".format(exc)) from exc
        encoding = answer.get("encoding")
        if encoding is not None:
            if encoding not in ENCODINGS:
                raise wire.WorkerProtocolError("a result's 'encoding' is not one of the markers")
            record["encoding"] = encoding
        if exchanges:
            rawio.apply_exchanges(record, exchanges, text)
        else:
            record.update(encode_body(text))
        return value

    def run_program(self, step: Any) -> Any:
        """Run a program step (`runner.runtime.steps.program.ProgramStep`) in the worker.

        Raises:
            Exception: what the program raised, as the worker named it.
        """
        self.programs[step.step_id] = step
        try:
            answer = self._request(
                "program",
                "result",
                step_id=step.step_id,
                program=step.ref,
                task_input=step.task_input,
                clock=step.caller.clock(),
            )
        finally:
            self.programs.pop(step.step_id, None)
        text, _ = wire.result_of(answer)
        try:
            return strict_loads(text)
        except ValueError as exc:
            raise wire.WorkerProtocolError(
                "a program's output is not JSON: {}".format(exc)
            ) from exc
