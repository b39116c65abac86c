"""The worker process: where tool functions, program steps and tool modules' imports run.

Standard library only, Python 3.9+. Forked by the runtime (`runner.runtime.worker.fork`), or
started as ``python3 -u -m runner.runtime.worker READ_FD WRITE_FD WITNESS_FD``
(`runner.runtime.worker.client`); either way `main` runs with those three; it holds no descriptor of
the host channel (the runtime's are non-inheritable and the spawn closes every other fd) and
talks only over its two pipe ends (and the witness's bootstrap socket, closed before user
code). What it answers is only what it says: the runtime builds every call record itself
from these answers (`runner.runtime.worker.wire` checks them).

Requests (runtime -> worker; each answered by a message of the reply type with the same ``id``):

    load      {manifest, mode, tool_paths, modules,  -> loaded {code: [tool ids with code]}
               environment, clock}
    call      {tool, args, clock, serve?}            -> result {text | error, exchanges}
    program   {step_id, program, task_input, clock}  -> result {text | error}
    manifest  {spec}                                  -> described {fields | error}

Every answer may carry ``observed`` (mode ``reproduce``): what the user's code read since the
last answer that the trace does not pin (`runner.runtime.nondeterminism.drain`).

From the worker, while a program runs: ``tool`` {step_id, tool, args} (a program's ``@tool``
call; the runtime's guard decides, its caller runs and records it) -> ``tool_result``
{text | error, clock}.

First of all, on a single thread, the worker installs the egress witness's seccomp filter on
itself over the bootstrap socket ``WITNESS_FD`` (`install_witness`): every network call of the
worker and of every process it starts is then seen and answered by the runtime. Then, before
any user code is imported (`before_user_code`, the hook point): the process is made the
first candidate of the kernel's OOM killer (``oom_score_adj`` 1000: a memory hog in a tool
takes the worker, never the runtime), and every function in `BEFORE_USER_CODE` is called. A
tool whose code may not run in this episode is never bound: its ``@tool`` decorator keeps a
stub that raises `CapabilityDenied` (`runner.sdk.dispatch.deny_code`), so no reference to the
bare function exists in the process (not in `ToolDef.func`, not in a closure cell, not through
``gc``).
"""

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Dict, FrozenSet, List

from runner import sdk
from runner.errors import ToolNotResolvable
from runner.runtime.channel import Channel, close_in_child
from runner.runtime.egress import audit
from runner.runtime.mcphub import ENV_SERVERS as ENV_MCP_SERVERS
from runner.runtime.registry import RuntimeRegistry
from runner.runtime.replay import rawserve
from runner.runtime.steps.program import arguments_of, return_class, run_program
from runner.runtime.worker import wire
from runner.sdk import dispatch, rawio, wallclock
from runner.trace.jsonform import json_form, revive
from runner.trace.strictjson import loads as strict_loads
from runner.wire.protocol import TOOLS_DIR

__all__ = ["BEFORE_USER_CODE", "WorkerProcess", "before_user_code"]

BEFORE_USER_CODE: List[Callable[[], None]] = []
"""Called in the worker, in order, before any user code is imported (the witness's hook)."""


def before_user_code() -> None:
    """Prepare this process before user code: OOM-kill candidate, then `BEFORE_USER_CODE`.

    Also sets `runner.sdk.dispatch.ENV_WITHHOLD` for the worker's children: a process started
    from here binds no tool code (a Python child importing a tool module and calling a tool
    gets `CapabilityDenied`; tools run here, through the runtime).
    """
    os.environ[dispatch.ENV_WITHHOLD] = "1"
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")
    for hook in BEFORE_USER_CODE:
        hook()


def _observe(tool_paths: Any, environment: Any) -> None:
    """Start the nondeterminism report (`runner.runtime.nondeterminism`; reproduce only).

    The tool snapshot's folders are pinned; the variables the runtime set (the gateway's, the
    child hook's ``PYTHONPATH``) are its own.
    """
    from runner.runtime import nondeterminism  # only here: shadow runs never load it

    paths = [p for p in tool_paths if isinstance(p, str)] if isinstance(tool_paths, list) else []
    own = list(environment) if isinstance(environment, dict) else []
    nondeterminism.install([TOOLS_DIR, *paths], own_env=[*own, "PYTHONPATH"])


def _code_ids(manifest: Any, mode: str) -> FrozenSet[str]:
    """Tools whose code may run in this episode (any other ``@tool`` gets a denying stub)."""
    tools = manifest.get("tools") if isinstance(manifest, dict) else None
    found = set()
    for entry in tools if isinstance(tools, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        effect = entry.get("effect")
        if mode == "reproduce":
            if effect in ("pure", "read"):  # pure runs; read may run over its raw bodies
                found.add(entry["id"])
        elif entry.get("disposition") == "execute":
            found.add(entry["id"])
    return frozenset(found)


class WorkerProcess:
    """The worker's side of the pipe.

    Args:
        read_fd: requests from the runtime arrive here.
        write_fd: answers leave here.
    """

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.pipe = Channel(
            read_fd,
            write_fd,
            exit=lambda code: os._exit(code),  # the runtime closed its end: nothing left to do
            on_message=self._on_message,
            max_bytes=wire.MAX_PIPE_BYTES,
            max_inbound=wire.MAX_PIPE_BYTES + 4096,
        )
        # a fork of the worker does not keep its pipe (an ``exec`` closes it: not inherited)
        close_in_child(read_fd, write_fd)
        self.functions: Dict[str, Any] = {}
        self.code_ids: FrozenSet[str] = frozenset()
        self._requests = 0
        self._lock = threading.Lock()

    def serve(self) -> None:
        """Answer requests until the runtime closes the pipe (the process then exits)."""
        self.pipe.start_reader()
        threading.Event().wait()

    # --- requests ---------------------------------------------------------------------------

    def _on_message(self, message: Dict[str, Any]) -> None:
        handler = {
            "load": self._load,
            "call": self._call,
            "program": self._program,
            "manifest": self._manifest,
        }.get(message["type"])
        if handler is None or not isinstance(message.get("id"), str):
            sys.stderr.write("sandbox-replay worker: unexpected {!r}\n".format(message["type"]))
            return
        reply = {"load": "loaded", "manifest": "described"}.get(message["type"], "result")
        threading.Thread(target=self._answer, args=(handler, message, reply), daemon=True).start()

    def _answer(
        self, handler: Callable[..., Dict[str, Any]], message: Dict[str, Any], reply: str
    ) -> None:
        try:
            fields = handler(message)
        except BaseException as exc:
            fields = {"error": wire.error_fields(exc), "exchanges": getattr(exc, "_exchanges", [])}
        audit.flush_child()  # its egress counts reach the child log before the answer
        observing = sys.modules.get("runner.runtime.nondeterminism")  # reproduce only
        if observing is not None and observing.installed():  # read since the last answer
            observed = observing.drain()
            if observed:
                fields = dict(fields, observed=observed)
        try:
            self.pipe.send_raw(dict(fields, type=reply, id=message["id"]))
        except ValueError as exc:  # too large or not encodable: say so instead
            error = {"class": "ValueError", "message": "answer not sent: {}".format(exc)[:4096]}
            self.pipe.send_raw({"type": reply, "id": message["id"], "error": error})

    def _load(self, message: Dict[str, Any]) -> Dict[str, Any]:
        manifest, mode = message.get("manifest"), str(message.get("mode"))
        environment = message.get("environment")
        if isinstance(environment, dict):
            os.environ.update({str(k): str(v) for k, v in environment.items()})
            audit.gateway_from_env()  # the gateway is the runtime, not egress
            if environment.get(ENV_MCP_SERVERS):  # the agent's MCP servers: the stand-in
                from runner.runtime import mcproute, mcpspawn

                mcpspawn.install_from_env()
                mcproute.install_from_env()  # and its URLs to the gateway (mcphttp)
        self._clock(message)  # import-time reads see the run's clock
        if mode == "reproduce":  # the nondeterminism report, from the tool modules' import on
            _observe(message.get("tool_paths"), environment)
        self.code_ids = _code_ids(manifest, mode)
        dispatch.deny_code(lambda tool_id: tool_id not in self.code_ids)
        with sdk.replay_context(frozenset()):  # module import runs no tool
            registry = RuntimeRegistry.from_manifest(
                manifest,
                mode,
                message.get("tool_paths") or [],
                message.get("modules") or [],
                source="manifest.json",
            )
        for tool_id in registry.ids:
            func = registry.resolve(tool_id).func
            if func is not None:
                self.functions[tool_id] = func
        return {"code": sorted(self.functions)}

    def _manifest(self, message: Dict[str, Any]) -> Dict[str, Any]:
        # here: mode manifest only; its MCP listing imports subprocess (~3 ms of every start)
        from runner.runtime.manifest import answer

        spec = message.get("spec")
        return {"fields": answer(spec if isinstance(spec, dict) else {})}

    def _clock(self, message: Dict[str, Any]) -> None:
        reading = message.get("clock")
        if isinstance(reading, (int, float)) and not isinstance(reading, bool):
            wallclock.set_reading(float(reading))
            sdk.set_clock(lambda: float(reading))

    def _call(self, message: Dict[str, Any]) -> Dict[str, Any]:
        tool_id, args = str(message.get("tool")), message.get("args")
        func = self.functions.get(tool_id)
        if func is None:
            raise ToolNotResolvable("tool {!r} has no code in the worker".format(tool_id))
        if not isinstance(args, dict):
            raise TypeError("tool {!r} takes keyword arguments (a JSON object)".format(tool_id))
        self._clock(message)
        served = message.get("serve")
        exchanges: List[Dict[str, Any]] = []
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(dispatch.direct())
                stack.enter_context(sdk.replay_context(self.code_ids))
                if isinstance(served, dict):
                    stack.enter_context(rawserve.served_by_code(served, tool_id))
                exchanges = stack.enter_context(rawio.capture())
                value = func(**args)
            text, encoding = json_form(value)  # never raises: recording changes no tool
        except BaseException as exc:
            exc._exchanges = wire.encode_exchanges(exchanges)  # type: ignore[attr-defined]
            raise
        answer = {"text": text, "exchanges": wire.encode_exchanges(exchanges)}
        if encoding is not None:
            answer["encoding"] = encoding
        return answer

    def _program(self, message: Dict[str, Any]) -> Dict[str, Any]:
        step_id, ref = str(message.get("step_id")), str(message.get("program"))
        task_input = message.get("task_input")
        self._clock(message)

        def remote(definition: Any, args: tuple, kwargs: dict) -> Any:  # type: ignore[type-arg]
            with self._lock:
                self._requests += 1
                request_id = "t{}".format(self._requests)
            answer = self.pipe.request(
                "tool",
                "tool_result",
                request_id,
                step_id=step_id,
                tool=str(definition.id),
                args=arguments_of(definition, args, kwargs),
            )
            self._clock(answer)
            if answer.get("gone"):
                os._exit(0)
            if answer.get("error") is not None:
                raise wire.error_of(answer["error"])
            return revive(strict_loads(str(answer.get("text"))), return_class(definition))

        return {"text": run_program(ref, step_id, task_input, remote)}


def install_witness(channel: int) -> None:
    """First thing in the worker: the egress witness's filter (`runner.runtime.egress.seccomp`).

    The runtime answers the bootstrap on its end of ``channel`` (`runner.runtime.egress.
    witness.serve`). Without the witness the hook's own coverage notes come back (the runtime
    reports why it is missing).
    """
    with audit.unnoted():  # its ctypes lookups are the runtime's machinery, not foreign code
        # imported here, not at the top: a worker without the witness never loads its ctypes
        # machinery (and the import, like the install, runs under `audit.unnoted`)
        from runner.runtime.egress import seccomp

        installed = seccomp.install(channel)
    os.close(channel)
    audit.set_witnessed(installed.witnessed)


def main(argv: List[str]) -> int:
    """The worker's entry: ``READ_FD WRITE_FD [WITNESS_FD]``; serve until the runtime goes away.

    On Windows ``--handles READ_HANDLE WRITE_HANDLE``: inherited handles, opened as fds here
    (`runner.runtime.worker.spawn.spawn_options`).
    """
    if argv[:1] == ["--handles"]:
        import msvcrt  # Windows only

        read_fd = msvcrt.open_osfhandle(int(argv[1]), os.O_RDONLY)  # type: ignore[attr-defined]
        write_fd = msvcrt.open_osfhandle(int(argv[2]), os.O_WRONLY)  # type: ignore[attr-defined]
        argv = argv[3:]
    else:
        read_fd, write_fd = int(argv[0]), int(argv[1])
        argv = argv[2:]
    if argv:  # before any other thread exists and any user code is imported
        install_witness(int(argv[0]))
    dispatch.inherit_context_in_threads()
    if not wallclock.installed():  # sitecustomize installs it (before the audit hook)
        wallclock.install()
    before_user_code()
    WorkerProcess(read_fd, write_fd).serve()
    return 0
