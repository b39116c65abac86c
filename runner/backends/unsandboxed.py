"""A backend that runs the in-sandbox runtime as a plain local process: record mode only.

``sandbox-replay record`` runs a workflow *outside* the sandbox, with its real tools and
providers (SPEC.md: production runs are recorded, purpose ``live``). It reuses the whole
episode driver (`runner.episode.driver.run_episode`: the NDJSON protocol, the provider,
the trace writer, the status rules) with this backend in place of Docker.

There is no isolation here, on purpose, and the name says so: `UnsandboxedProcessBackend`. The
run folder is copied to a scratch folder with the sandbox paths of ``run.json`` (``tool_paths``)
mapped back to the host folders they mount; the runtime starts with
``SANDBOX_REPLAY_RUN_DIR`` pointing at it, ``HOME``/``TMPDIR`` in a fresh scratch folder (the
run's scratch space, removed afterwards), the caller's working directory and the host's
environment otherwise (real tools need their configuration, e.g. ``HELPDESK_DATA``).

The lifetime cap of every backend (`runner.backends.base.LifetimeCap`) holds here too: the
command runs under ``timeout -s KILL N`` when the host has coreutils ``timeout`` (Linux; not
stock macOS or Windows, where the runtime's own watchdog and end-of-file on its stdin pipe, which
closes when this process dies, are what end an orphaned run).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

import structlog

from runner import resources
from runner.backends.base import (
    STDERR,
    STDOUT,
    Backend,
    ExitState,
    Reaped,
    Sandbox,
    SandboxSpec,
)
from runner.backends.timed_write import TimedWriter
from runner.errors import InfrastructureError
from runner.runtime import protocol

log = structlog.get_logger(__name__)

ENV_RUN_DIR = "SANDBOX_REPLAY_RUN_DIR"


class _Process(Sandbox):
    def __init__(self, run_id: str, process: subprocess.Popen[bytes]) -> None:
        self.run_id = run_id
        self._process = process
        self._queue: queue.Queue[tuple[int, bytes] | None] = queue.Queue()
        self._open = 2
        self.killed = False
        self._started = time.monotonic()
        self._writer = TimedWriter(self._write_all, run_id)
        for stream, handle in ((STDOUT, process.stdout), (STDERR, process.stderr)):
            threading.Thread(target=self._pump, args=(stream, handle), daemon=True).start()

    def _pump(self, stream: int, handle: IO[bytes] | None) -> None:
        if handle is not None:
            while True:
                chunk = handle.read1(65536)  # type: ignore[attr-defined]
                if not chunk:
                    break
                self._queue.put((stream, chunk))
        self._queue.put(None)

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        try:
            self._writer.write(data, timeout_s)
        except (OSError, ValueError) as exc:  # TimeoutError included
            raise InfrastructureError(f"cannot write to the local runtime: {exc}") from exc

    def _write_all(self, data: bytes) -> None:
        stdin = self._process.stdin
        if stdin is None:
            raise ValueError("the runtime has no stdin pipe")
        stdin.write(data)
        stdin.flush()

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        while self._open:
            try:
                item = self._queue.get(timeout=poll_s)
            except queue.Empty:
                yield None
                continue
            if item is None:
                self._open -= 1
                continue
            yield item

    def kill(self) -> None:
        self.killed = True
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)

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

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        """Start the runtime for ``spec`` as a local process; remove its scratch folders after.

        Raises:
            InfrastructureError: the process cannot start or its run folder is unreadable.
        """
        mounts = {m.target: m.source for m in spec.mounts}
        run_src = mounts.get(protocol.RUN_DIR)
        if run_src is None:
            raise InfrastructureError("the run spec mounts no run folder")
        scratch = Path(tempfile.mkdtemp(prefix=f"sandbox-replay-record-{spec.run_id}-"))
        process: subprocess.Popen[bytes] | None = None
        try:
            run_dir = scratch / "run"
            run_dir.mkdir()
            work = scratch / "tmp"
            work.mkdir()
            for name in ("manifest.json", "run.json"):
                shutil.copyfile(Path(run_src) / name, run_dir / name)
            run_json = run_dir / "run.json"
            spec_data = json.loads(run_json.read_text(encoding="ascii"))
            spec_data["tool_paths"] = [
                str(mounts.get(path, path)) for path in spec_data.get("tool_paths", [])
            ]
            run_json.write_text(json.dumps(spec_data), encoding="utf-8")
            env = dict(os.environ)
            env.update(
                {k: v for k, v in spec.env.items() if k not in ("PYTHONPATH", "HOME", "TMPDIR")}
            )
            env.update(self.env)
            package_parent = str(resources.package_dir().parent)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p
            )
            env.update({ENV_RUN_DIR: str(run_dir), "HOME": str(work), "TMPDIR": str(work)})
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
                    start_new_session=True,
                )
            except OSError as exc:
                raise InfrastructureError(f"cannot start the local runtime: {exc}") from exc
            log.info("local_runtime_started", run_id=spec.run_id, pid=process.pid)
            yield _Process(spec.run_id, process)
        finally:
            if process is not None and process.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            shutil.rmtree(scratch, ignore_errors=True)

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """Nothing to reap: local processes die with their session."""
        return []
