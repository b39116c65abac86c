"""The runtime's life: hello, start, load the run, run the episode, report, exit.

Standard library only, Python 3.9+. ``python3 -u -m runner.runtime`` (`runner.runtime.__main__`)
isolates the channel first, then calls `serve`. Sequence:

1. install the run's wall clock (`runner.sdk.wallclock`; real time until the run's
   reading is known), then the outbound-destination hook in this process
   (`runner.runtime.egress.audit`) and set the
   environment that makes every Python child load it (``sitecustomize``) and report to the
   child log (`runner.runtime.egress.childlog`); fork the worker and wait for its egress
   witness's bootstrap (the worker has imported everything by then);
2. send ``hello`` ``{protocol, python, pid, platform, packages}``: the sandbox is ready, so a
   warm pool's sandbox (`runner.backends.warmpool.pool`, warm at its ``hello``) runs its first
   tool call without waiting for its worker; then the ``coverage`` notes of step 1
   (without a writable ``TMPDIR``: children cannot report; a clock that could not be patched);
   then wait for ``start`` (``shutdown`` or EOF on stdin end the process at once, at any time);
3. take the run spec and the manifest from ``start`` (`check_run_spec`, `check_manifest`:
   the channel bounds the line, `runner.wire.protocol.MAX_START_BYTES`); the sandbox's
   lifetime cap now counts from this assignment (`runner.runtime.pid1.LifetimeTimer.rearm`:
   a pooled sandbox waited under its idle cap until here); freeze the wall clock at the run's
   clock start (every wall-clock read of this process and of its Python children is the run's);
   arm the deadline watchdog with the run's ``deadline_s`` (`runner.runtime.watchdog`: exit
   124 a grace after the run's deadline, counted from ``start``, when the host has not ended
   the run); build the registry from the manifest alone;
4. with program steps, start the model gateway (`runner.runtime.steps.gateway`) and point the
   SDKs at it; inside ``runner.sdk.replay_context(execute ids)`` run the episode; send
   ``episode``.
   In mode ``manifest`` (`runner.runtime.manifest`) steps 3-4 are instead: import the tool
   modules, send ``manifest`` with their tools (no manifest is needed, no tool runs).

Exit codes: 0 after ``episode`` (whatever its status) or on ``shutdown``/EOF; `EXIT_RUNTIME_ERROR`
(70) after an ``error`` message when the runtime itself failed (a malformed ``start``, a tool
module that does not import, a bug): the host classifies that as ``crashed``; 124
(`runner.runtime.watchdog.EXIT_DEADLINE`) when the watchdog ended a run past its deadline.

Threads that tool code starts inherit the replay context (``threading.Thread.start`` is wrapped
to run the thread in a copy of the starter's context), so the call-time guard holds in them too.
"""

import json
import os
import sys
import threading
import time
from typing import Any, Dict, Optional

from runner import sdk
from runner.errors import InputError
from runner.runtime import pid1, watchdog
from runner.runtime.channel import Channel
from runner.runtime.egress import audit
from runner.runtime.egress.childlog import ChildLog
from runner.runtime.environment import environment_platform, installed_packages
from runner.runtime.mcphttp import McpHttpEndpoint
from runner.runtime.mcphub import ENV_SERVERS as ENV_MCP_SERVERS
from runner.runtime.mcphub import McpHub
from runner.runtime.mcphub import servers_of as mcp_servers
from runner.runtime.oomcount import OomCounter
from runner.runtime.registry import RuntimeRegistry
from runner.runtime.replay.calls import Caller
from runner.runtime.replay.clock import Clock
from runner.runtime.replay.recordings import ObservationStore, TraceStore
from runner.runtime.steps.engine import Episode
from runner.runtime.worker.client import Worker
from runner.sdk import dispatch, wallclock
from runner.sdk.mcphttp import url_servers
from runner.trace.strictjson import MAX_VALUE_DEPTH, depth_of
from runner.wire import protocol
from runner.wire.errors import error_class_name

EXIT_RUNTIME_ERROR = 70
PUMP_INTERVAL_S = 0.2
# record: every tool with code executes; manifest: only describe the tools (runtime/manifest.py)
MODES = ("shadow", "reproduce", "record", "manifest")


START_SOURCE = "start message"


def check_run_spec(spec: Any) -> Dict[str, Any]:
    """The run spec of ``start`` (``run``), checked for the keys the runtime needs.

    Raises:
        InputError: not an object, a missing key or a bad ``mode``/``clock``/``deadline_s``.
    """
    path = START_SOURCE
    if not isinstance(spec, dict):
        raise InputError("expected the run spec object", file=path, field="run")
    for key in ("mode", "workflow", "task"):
        if key not in spec:
            raise InputError("missing key", file=path, field="run." + key)
    if spec["mode"] not in MODES:
        raise InputError(
            "must be one of {}, not {!r}".format(MODES, spec["mode"]), file=path, field="run.mode"
        )
    if not isinstance(spec["workflow"], dict):
        raise InputError("expected the normalised workflow object", file=path, field="run.workflow")
    if not isinstance(spec["task"], dict):
        raise InputError("expected the task record", file=path, field="run.task")
    clock = spec.get("clock") or {}
    if (
        not isinstance(clock, dict)
        or not isinstance(clock.get("start", 0), (int, float))
        or not isinstance(clock.get("step_s", 1.0), (int, float))
    ):
        raise InputError(
            "expected {start: epoch seconds, step_s: seconds}", file=path, field="run.clock"
        )
    fork_at = spec.get("fork_at")
    if fork_at is not None and (
        isinstance(fork_at, bool)
        or not isinstance(fork_at, int)
        or fork_at < 1
        or spec["mode"] != "shadow"
    ):
        raise InputError(
            "expected null or a call count >= 1 (mode shadow only)", file=path, field="run.fork_at"
        )
    try:
        watchdog.deadline_of(spec.get("deadline_s"))
    except ValueError as exc:
        raise InputError(str(exc), file=path, field="run.deadline_s") from exc
    return spec


def check_manifest(manifest: Any, mode: str) -> Optional[Dict[str, Any]]:
    """The manifest of ``start``: an object (None in mode ``manifest``, which reads none).

    Its entries are checked by `runner.runtime.registry.RuntimeRegistry.from_manifest`.

    Raises:
        InputError: not an object.
    """
    if mode == "manifest" and manifest is None:
        return None
    if not isinstance(manifest, dict):
        raise InputError("expected the manifest object", file=START_SOURCE, field="manifest")
    return manifest


# The episode message must fit one protocol line; its ``output`` is the only unbounded field.
MAX_OUTPUT_BYTES = protocol.MAX_MESSAGE_BYTES // 2
OUTPUT_PREFIX_CHARS = 65536


def bounded_episode(episode: Dict[str, Any]) -> Dict[str, Any]:
    """``episode`` with an ``output`` too large for the channel replaced by a marked summary.

    A workflow output over `MAX_OUTPUT_BYTES` (as JSON) becomes ``{"truncated": true,
    "original_length": bytes, "sha256": hex, "prefix": first characters}``: the status stays
    the workflow's own (a big output is no infrastructure failure) and the cut is recorded.
    One nested deeper than `runner.trace.strictjson.MAX_VALUE_DEPTH` becomes ``{"truncated": true,
    "nested_deeper_than": 64}`` the same way.
    """
    import hashlib

    if depth_of(episode.get("output"), stop_above=MAX_VALUE_DEPTH) > MAX_VALUE_DEPTH:
        # a program step's own value (tool results are refused at the call): it could not
        # cross the channel, whose decoder refuses nesting past MAX_DEPTH
        return dict(episode, output={"truncated": True, "nested_deeper_than": MAX_VALUE_DEPTH})
    try:
        text = json.dumps(episode.get("output"), ensure_ascii=True, allow_nan=False)
    except ValueError:
        text = json.dumps(repr(episode.get("output"))[:MAX_OUTPUT_BYTES])
    if len(text) <= MAX_OUTPUT_BYTES:
        return episode
    data = text.encode("ascii")
    summary = {
        "truncated": True,
        "original_length": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "prefix": text[:OUTPUT_PREFIX_CHARS],
    }
    return dict(episode, output=summary)


class Runtime:
    """Wires the channel, the audit hook, the registry and the episode together.

    Args:
        channel: the channel (its reader not started yet).
        cap: the sandbox's lifetime cap, restarted at ``start`` with ``cap_s`` (None: none).
        cap_s: the run's cap in seconds, counted from ``start``.
        dumpable_problem: why this process could not be made not dumpable (`runner.runtime.
            pid1.make_undumpable`), or None; ``hello``'s ``isolation`` says so.
    """

    def __init__(
        self,
        channel: Channel,
        dumpable_problem: Optional[str] = None,
        cap: Optional[pid1.LifetimeTimer] = None,
        cap_s: Optional[float] = None,
    ) -> None:
        self.channel = channel
        self.dumpable_problem = dumpable_problem
        self.cap, self.cap_s = cap, cap_s
        self.started = time.monotonic()  # reset at ``start``: the run's deadline counts from it
        self.child_log: Optional[ChildLog] = None
        self.reaper = pid1.Reaper()
        self.worker = Worker(self.reaper)
        self._egress_lock = threading.Lock()  # pop + send atomically: records stay in order
        self._mcp_lock = threading.Lock()
        self._mcp_sent = 0  # mcp_request messages sent: their ids

    def _isolation(self) -> Dict[str, Any]:
        """``hello``'s ``isolation``: PID 1 (the namespace's init), not dumpable, and why not."""
        found: Dict[str, Any] = {
            "pid1": os.getpid() == 1,
            "dumpable": self.dumpable_problem is not None,
        }
        if self.dumpable_problem is not None:
            found["problem"] = self.dumpable_problem
        return found

    def _pump(self) -> None:
        """Forward outbound-destination records while a call is still running.

        A tool that connects and then hangs until the host kills the sandbox must not take its
        log with it: every `PUMP_INTERVAL_S` what was logged so far is sent.
        """
        while True:
            time.sleep(PUMP_INTERVAL_S)
            try:
                self.flush_egress()
            except Exception as exc:  # never kill the episode over the log; say why
                sys.stderr.write("sandbox-replay runtime: egress pump: {!r}\n".format(exc))

    def _flush_queued(self) -> None:
        with self._egress_lock:
            for message in audit.drain():
                self.channel.send_raw(message)

    def flush_egress(self) -> None:
        """Send what this process and its children logged so far."""
        with self._egress_lock:
            for message in audit.drain():
                self.channel.send_raw(message)
            if self.child_log is not None:
                for message in self.child_log.read_new():
                    self.channel.send_raw(message)

    def _request_model(self, fields: Dict[str, Any]) -> Dict[str, Any]:
        message_id = "m{}".format(fields["index"])
        return self.channel.request("model_request", "model_response", message_id, **fields)

    def _request_api(self, fields: Dict[str, Any]) -> Dict[str, Any]:
        message_id = "g{}".format(fields["index"])
        return self.channel.request("gateway_request", "gateway_response", message_id, **fields)

    def _request_mcp(self, fields: Dict[str, Any]) -> Dict[str, Any]:
        """Ask the host to pass one message to an MCP server URL (``record``; mcphttp)."""
        with self._mcp_lock:
            self._mcp_sent += 1
            message_id = "h{}".format(self._mcp_sent)
        return self.channel.request("mcp_request", "mcp_response", message_id, **fields)

    def _install_audit(self) -> Optional[str]:
        """Install the hook; why children cannot report (for a ``coverage`` note), or None."""
        try:
            self.child_log = ChildLog()
        except OSError as exc:  # no writable TMPDIR: children cannot report; say so
            audit.install(None, in_memory=True)
            return "child egress log unavailable: {}".format(exc)
        audit.install(self.child_log.path, in_memory=True)
        os.environ.update(audit.child_environment(self.child_log.path))
        return None

    def serve(self) -> int:
        """Run the whole protocol; return the process exit code."""
        try:
            # the clock before the audit hook: patching datetime looks a symbol up with ctypes
            datetime_problem = wallclock.install()
            log_problem = self._install_audit()
            # the worker is forked before ``hello`` (its environment: the audit
            # hook's; the run's own, the gateway's, comes with ``load``): a sandbox that said
            # hello runs its first call at once (the warm pool hands it out at its hello)
            self.worker.spawn()
            witness_coverage = self.worker.witness_coverage()
            self.channel.send(
                "hello",
                protocol=protocol.PROTOCOL_VERSION,
                python=".".join(str(v) for v in sys.version_info[:3]),
                pid=os.getpid(),
                platform=environment_platform(),
                packages=installed_packages(),
                isolation=self._isolation(),
            )
            self.channel.before_send = self._flush_queued  # after hello: it comes first
            if log_problem is not None:
                self.channel.send("coverage", partial=True, reason=log_problem)
            if datetime_problem is not None:
                self.channel.send(
                    "coverage",
                    partial=True,
                    reason="datetime.now() reads the machine's clock: {}".format(datetime_problem),
                    clock="machine",
                )
            self.channel.start_reader()
            self.reaper.start()
            start = self.channel.wait_for("start")
            self.started = time.monotonic()  # the run is assigned: its caps count from now
            oom = OomCounter()  # a warm spare's group is reused: count from the run's start
            if self.cap is not None and self.cap_s is not None:
                self.cap.rearm(self.cap_s)
            if witness_coverage is not None:  # the worker's tree is not witnessed: say why
                self.channel.send_raw(witness_coverage)
            threading.Thread(target=self._pump, name="sandbox-replay-egress", daemon=True).start()
            spec = check_run_spec(start.get("run"))
            manifest = check_manifest(start.get("manifest"), str(spec["mode"]))
            # frozen at the start before any tool module is imported (its import-time reads)
            wallclock.set_reading(float((spec.get("clock") or {}).get("start", 0.0)))
            deadline_s = watchdog.deadline_of(spec.get("deadline_s"))
            if deadline_s is not None:
                watchdog.arm(deadline_s, self.started)
            if spec["mode"] == "manifest":
                fields = self.worker.describe(spec)
                self.flush_egress()
                self.channel.send("manifest", **fields)
                return 0
            assert manifest is not None  # check_manifest: only mode manifest has none
            episode = self._run(spec, manifest)
            self.flush_egress()
            oom_kills = oom.since_start()
            if oom_kills is not None:  # a child the kernel ended: the engine's flag can be late
                episode = dict(episode, oom_kills=oom_kills)
            if spec["mode"] == "reproduce":  # what the user's code read (the worker says)
                self.channel.send("nondeterminism", **self.worker.nondeterminism())
            self.channel.send("episode", **bounded_episode(episode))
            return 0
        except Exception as exc:
            import traceback  # only on failure: not on every run's start path

            text = traceback.format_exc()
            sys.stderr.write(text)
            try:
                self.flush_egress()
                self.channel.send(
                    "error",
                    **{
                        "class": error_class_name(exc),
                        "message": str(exc),
                        "traceback": text[-8000:],
                    },
                )
            except Exception:  # noqa: S110 - the exit code still says what happened
                pass
            return EXIT_RUNTIME_ERROR

    def _run(self, spec: Dict[str, Any], manifest: Dict[str, Any]) -> Dict[str, Any]:
        mode = str(spec["mode"])
        task = spec["task"]
        task_input = task.get("input") if isinstance(task.get("input"), dict) else {}
        fork_at = spec.get("fork_at")  # an anchored fork: its prefix is served from the trace
        served = mode == "reproduce" or fork_at is not None
        trace = TraceStore(spec.get("recorded_calls") if served else None)
        clock_spec = spec.get("clock") or {}
        clock = Clock(
            clock_spec.get("start", 0.0),
            clock_spec.get("step_s", 1.0),
            trace if served else None,
            live=mode == "record",
            publish=wallclock.set_reading,
        )
        dispatch.inherit_context_in_threads()
        sdk.set_clock(clock)
        caller = Caller(
            self.channel.send,
            self._request_model,
            mode,
            ObservationStore(task.get("observations")),
            trace,
            clock,
            after_call=self.flush_egress,
            request_api=self._request_api,
            execute=self.worker.execute,
            fork_at=fork_at,
        )
        gateway = self._start_gateway(spec["workflow"], caller)
        tool_paths, modules = spec.get("tool_paths") or [], spec.get("modules") or []
        environment = gateway.environment() if gateway is not None else {}
        servers = []  # the agent's MCP servers: stdio commands and Streamable HTTP URLs
        if gateway is not None:
            servers = mcp_servers(spec["workflow"]) + url_servers(spec["workflow"])
        if servers:  # stand-ins for the commands (mcpspawn), the URLs routed here (mcproute)
            environment[ENV_MCP_SERVERS] = json.dumps(servers)
        code = self.worker.load(manifest, mode, tool_paths, modules, environment, clock())
        registry = RuntimeRegistry.from_manifest(
            manifest, mode, source=START_SOURCE + " (manifest)", code=code
        )
        if servers:
            gateway.mcp = McpHub(caller, registry, mode, servers, self.worker.programs)
            if any(server.get("url") for server in servers):  # Streamable HTTP (mcphttp)
                gateway.mcp_http = McpHttpEndpoint(gateway.mcp, mode, self._request_mcp)
        try:
            with sdk.replay_context(registry.execute_ids):
                return Episode(
                    spec["workflow"],
                    task_input,
                    registry,
                    caller,
                    self.channel.send,
                    gateway=gateway,
                    worker=self.worker,
                ).run()
        finally:
            caller.flush()

    def _start_gateway(self, workflow: Dict[str, Any], caller: Caller) -> Any:
        """The model gateway, when the workflow has a program step (else None).

        Its environment (base URLs, placeholder keys, no trace export) is set in this
        process before any program is imported, so the SDKs and every child see it.
        """
        from runner.runtime.steps.program import program_steps

        if not program_steps(workflow):
            return None
        from runner.runtime.steps.gateway import Gateway

        gateway = Gateway(
            caller, lambda kind, **fields: self.channel.send("gateway_note", kind=kind, **fields)
        )
        os.environ.update(gateway.environment())
        audit.set_gateway(gateway.host, gateway.port)
        self.worker.set_gateway_port(gateway.port)
        gateway.start()
        return gateway
