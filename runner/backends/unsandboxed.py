"""A backend that runs the in-sandbox runtime as a plain local process: record mode only.

``sandbox-replay record`` runs a workflow *outside* the sandbox, with its real tools and
providers (SPEC.md: production runs are recorded, purpose ``live``). It reuses the whole
episode driver (`runner.episode.driver.run_episode`: the NDJSON protocol, the provider,
the trace writer, the status rules) with this backend in place of Docker.

There is no isolation here, on purpose, and the name says so: `UnsandboxedProcessBackend`. The
sandbox paths of the ``start`` message's run spec (``tool_paths``) are mapped back to the host
folders they mount as the message passes (`_Process.write`); the runtime starts with
``HOME``/``TMPDIR`` in a fresh scratch folder (the
run's scratch space, removed afterwards), the caller's working directory and the host's
environment otherwise (real tools need their configuration, e.g. ``HELPDESK_DATA``).

The lifetime cap of every backend (`runner.backends.base.LifetimeCap`) holds here too: the
command runs under ``timeout -s KILL N`` when the host has coreutils ``timeout`` (Linux; not
stock macOS or Windows, where the runtime's own watchdog and end-of-file on its stdin pipe, which
closes when this process dies, are what end an orphaned run). The runtime's process group is
killed portably (`runner.backends.processgroup`: ``killpg`` on POSIX, ``taskkill /T`` on
Windows).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from runner import resources
from runner.backends.base import (
    Backend,
    ExitState,
    Reaped,
    Sandbox,
    SandboxSpec,
)
from runner.backends.pipes import PipedOutput
from runner.backends.processgroup import group_kwargs, kill_group
from runner.backends.timed_write import TimedWriter
from runner.errors import InfrastructureError
from runner.hostlog import get_logger
from runner.wire import protocol
from runner.wire.env import ENV_WITNESS

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions
    from runner.settings import Settings

log = get_logger(__name__)

_START_PREFIX = b'{"type":"start"'


def host_paths_in_start(data: bytes, mounts: Mapping[str, str]) -> bytes:
    """``data`` with a ``start`` message's ``run.tool_paths`` mapped to the host's folders.

    So is the ``cwd`` of each MCP server a description asks for its tools (``record`` of a
    workflow with an MCP server). Anything that is not a ``start`` line (with a run spec) is
    returned unchanged.
    """
    if not data.startswith(_START_PREFIX):
        return data
    message = protocol.decode(data)
    run = message.get("run")
    if not isinstance(run, dict) or not isinstance(run.get("tool_paths"), list):
        return data
    run["tool_paths"] = [mounts.get(str(path), str(path)) for path in run["tool_paths"]]
    for server in run.get("mcp_servers") or []:
        if isinstance(server, dict) and isinstance(server.get("cwd"), str):
            server["cwd"] = mounts.get(server["cwd"], server["cwd"])
    return protocol.encode(message)


class _Process(Sandbox):
    def __init__(
        self, run_id: str, process: subprocess.Popen[bytes], mounts: Mapping[str, str]
    ) -> None:
        self.run_id = run_id
        self._mounts = mounts
        self._process = process
        self.killed = False
        self._started = time.monotonic()
        self._writer = TimedWriter(self._write_all, run_id)
        self._output = PipedOutput(process)

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        try:
            self._writer.write(host_paths_in_start(data, self._mounts), timeout_s)
        except (OSError, ValueError) as exc:  # TimeoutError included
            raise InfrastructureError(f"cannot write to the local runtime: {exc}") from exc

    def _write_all(self, data: bytes) -> None:
        stdin = self._process.stdin
        if stdin is None:
            raise ValueError("the runtime has no stdin pipe")
        stdin.write(data)
        stdin.flush()

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        return self._output.frames(poll_s)

    def close(self) -> None:
        """Close the pipes and stop the output readers (after the process ended)."""
        for handle in (self._process.stdin, self._process.stdout, self._process.stderr):
            if handle is not None:
                with suppress(OSError, ValueError):
                    handle.close()
        self._output.stop()

    def kill(self) -> None:
        self.killed = True
        kill_group(self._process)

    def wait(self, timeout_s: float) -> ExitState:
        try:
            code = self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self._process.wait()
        if code < 0:
            code = 128 - code
        ran_s = time.monotonic() - self._started
        return ExitState(exit_code=code, killed_by_host=self.killed, ran_s=ran_s)


class UnsandboxedProcessBackend(Backend):
    """Runs the runtime as a local child process, without any isolation (record mode).

    Args:
        python: the interpreter (default: this one).
        env: extra environment variables for the runtime and the tools.
    """

    name = "process"

    def __init__(self, python: str | None = None, env: dict[str, str] | None = None) -> None:
        self.python = python or sys.executable
        self.env = dict(env or {})

    @classmethod
    def from_settings(
        cls, settings: Settings, options: BackendOptions | None = None
    ) -> UnsandboxedProcessBackend:
        """The registry's factory (``record``): this interpreter, ``options.env`` added."""
        return cls(env=dict(options.env) if options is not None else None)

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        """Start the runtime for ``spec`` as a local process; remove its scratch folders after.

        Raises:
            InfrastructureError: the process cannot start or its run folder is unreadable.
        """
        mounts = {m.target: str(m.source) for m in spec.mounts}
        scratch = Path(tempfile.mkdtemp(prefix=f"sandbox-replay-record-{spec.run_id}-"))
        process: subprocess.Popen[bytes] | None = None
        box: _Process | None = None
        try:
            work = scratch / "tmp"
            work.mkdir()
            env = dict(os.environ)
            env.update(
                {k: v for k, v in spec.env.items() if k not in ("PYTHONPATH", "HOME", "TMPDIR")}
            )
            env.update(self.env)
            package_parent = str(resources.package_dir().parent)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p
            )
            env.update({"HOME": str(work), "TMPDIR": str(work)})
            # a live local run (record) is no sandbox: its tools reach the network as they do in
            # production, so the egress witness (which answers every connect "unreachable") is
            # off and the in-process hook logs what they try (coverage partial where it is blind)
            env[ENV_WITNESS] = "off"
            command = [self.python if c in ("python3", "python") else c for c in spec.command]
            cap = shutil.which("timeout")
            if cap is not None:
                command = [cap, "-s", "KILL", str(spec.hard_cap.whole_s), *command]
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=Path.cwd(),  # live tools see the caller's working directory
                    env=env,
                    **group_kwargs(),  # POSIX: a session of its own; Windows: a new group
                )
            except OSError as exc:
                raise InfrastructureError(f"cannot start the local runtime: {exc}") from exc
            log.info("local_runtime_started", run_id=spec.run_id, pid=process.pid)
            box = _Process(spec.run_id, process, mounts)
            yield box
        finally:
            if process is not None and process.poll() is None:
                kill_group(process)
                process.wait()
            if box is not None:
                box.close()
            shutil.rmtree(scratch, ignore_errors=True)

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """Nothing to reap: local processes die with their session."""
        return []
