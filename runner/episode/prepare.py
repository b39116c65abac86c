"""Prepare one run: its run spec and manifest (sent in ``start``) and its `SandboxSpec`.

`prepare_run` builds the run spec and the manifest, which travel to the runtime in the
``start`` message (`start_message`; nothing of the run is mounted, so a sandbox can be started
before its run is known: the warm pool, `runner.backends.warmpool.pool`), and the spec: the
sandbox side of runner (`runner_mounts`) and the command's tool snapshot mounted
read-only (no user folder is mounted live, `runner.tools.snapshot`); a fixed environment;
limits from the policy overridden by settings (`runner.episode.limits`); the hard lifetime cap
`LifetimeCap` from the run timeout, and the same timeout as ``run.json`` ``deadline_s`` for the
runtime's watchdog. Nothing in the spec depends on the run but its ``run_id`` and
``labels``. The describing sandbox of `runner.admission` is prepared here
too, so that it has the same mounts, environment, user and limits as an episode.
"""

from __future__ import annotations

import functools
import importlib.util
import py_compile
import struct
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner import resources
from runner.backends.base import LifetimeCap, Mount, SandboxSpec, sandbox_user
from runner.backends.labels import LEDGER, LEDGER_KEY
from runner.domain.ids import IdFactory, new_run_id, path_for_id
from runner.episode.limits import max_rate_limit_wait_s, resource_limits
from runner.episode.reaping import ledger_id
from runner.episode.request import EpisodeRequest, PreparedRun
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.settings import Settings
from runner.tools.snapshot.sources import tool_mounts
from runner.wire import protocol

__all__ = [
    "RUNTIME_COMMAND",
    "compile_sandbox_packages",
    "prepare_run",
    "runner_mounts",
    "start_message",
]

log = get_logger(__name__)

RUNTIME_COMMAND = ("python3", "-u", "-m", "runner.runtime")
DEFAULT_CLOCK_START = 1767225600.0  # 2026-01-01T00:00:00Z: a fixed start when none is recorded
CLOCK_STEP_S = 1.0
SEED = 0


def start_message(
    run_spec: Mapping[str, Any], manifest: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``start`` message that assigns a run to a started runtime (`runner.wire.protocol`).

    Raises:
        InputError: the encoded message is over `protocol.MAX_START_BYTES` (the runtime would
            discard it unread): a reproduce run of a trace with too many recorded calls.
    """
    message = {
        "type": "start",
        "protocol": protocol.PROTOCOL_VERSION,
        "run": dict(run_spec),
        "manifest": dict(manifest) if manifest is not None else None,
    }
    size = len(protocol.encode(message))
    if size > protocol.MAX_START_BYTES:
        raise InputError(
            f"the run is too large to send to the sandbox: {size} bytes, at most "
            f"{protocol.MAX_START_BYTES} (fewer recorded calls or a smaller task)",
            field="recorded_calls",
        )
    return message


def _modules(manifest: Mapping[str, Any]) -> list[str]:
    seen: dict[str, None] = {}
    for entry in manifest.get("tools", []):
        module = entry.get("module")
        if module and entry.get("disposition", "execute") == "execute":
            seen.setdefault(module, None)
    return list(seen)


def runner_mounts(package: Path | None = None) -> list[Mount]:
    """Read-only mounts of the sandbox side of ``runner``: its ``__init__.py`` and packages.

    Only `runner.wire.protocol.SANDBOX_PACKAGES` (standard library only) go into a
    sandbox, under ``RUNTIME_ROOT/runner``; the host side (CLI, ledger, this driver) does not.
    Their bytecode is prepared first (`compile_sandbox_packages`, once per process).

    Args:
        package: the installed ``runner`` folder (default `runner.resources.package_dir`).
    """
    package = package or resources.package_dir()
    _compiled_once(package)
    target = f"{protocol.RUNTIME_ROOT}/runner"
    mounts = [Mount(package / "__init__.py", f"{target}/__init__.py")]
    mounts += [Mount(package / name, f"{target}/{name}") for name in protocol.SANDBOX_PACKAGES]
    return mounts


def compile_sandbox_packages(package: Path) -> bool:
    """Write the bytecode of the mounted packages beside their sources, where stale or missing.

    A sandbox mounts ``package`` read-only and runs with ``PYTHONDONTWRITEBYTECODE``: without
    these files every sandbox compiled every runtime module from source (~100 ms of CPU per
    run). Each ``X.py`` gets ``__pycache__/X.<cache tag>.pyc`` of this interpreter
    (PEP 3147 beside the source, whatever this host's ``sys.pycache_prefix``: the sandbox looks
    there), validated by source mtime and size (PEP 552 timestamp pycs, Python's default): a
    changed source makes its pyc stale, and the sandbox's importer then compiles the source
    again, so an out-of-date file is never run. A sandbox whose Python has another cache tag
    ignores them (it compiles from source, as without them). Nothing is imported or executed.

    Args:
        package: the ``runner`` folder whose `runner.wire.protocol.SANDBOX_PACKAGES` are
            mounted (its ``__init__.py`` is mounted as a lone file, without a ``__pycache__``:
            two lines, compiled in the sandbox).

    Returns:
        True when every pyc is fresh now; False when one could not be written (a read-only
        installation: the sandboxes then compile those modules themselves).
    """
    sources: list[Path] = []  # not runner/__init__.py: mounted as a file, no __pycache__ beside
    for name in protocol.SANDBOX_PACKAGES:
        sources += sorted(p for p in (package / name).rglob("*.py") if "__pycache__" not in p.parts)
    tag = sys.implementation.cache_tag
    written = failed = 0
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        try:
            if _fresh_pyc(source, pyc):
                continue
            py_compile.compile(
                str(source),
                cfile=str(pyc),
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
            )
            written += 1
        except (OSError, py_compile.PyCompileError) as exc:
            failed += 1
            log.debug("sandbox_bytecode_not_written", source=str(source), error=str(exc))
    if written or failed:
        log.debug("sandbox_bytecode", package=str(package), written=written, failed=failed)
    return failed == 0


def _fresh_pyc(source: Path, pyc: Path) -> bool:
    """Whether ``pyc`` is what the importer accepts for ``source`` (magic, flags, mtime, size)."""
    stat = source.stat()
    expected = importlib.util.MAGIC_NUMBER + struct.pack(
        "<III", 0, int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF
    )
    try:
        with pyc.open("rb") as handle:
            return handle.read(16) == expected
    except OSError:
        return False


@functools.cache
def _compiled_once(package: Path) -> bool:
    return compile_sandbox_packages(package)


def prepare_run(
    request: EpisodeRequest,
    settings: Settings,
    id_factory: IdFactory,
    *,
    command: Sequence[str] = RUNTIME_COMMAND,
    pool_lifetime_s: float = 0.0,
    rate_limit_wait_s: float | None = None,
) -> PreparedRun:
    """Build the run spec, the manifest and the sandbox spec of one run.

    The tool code is mounted from ``request.snapshot`` (`tool_mounts`).

    Args:
        request: what to run.
        settings: host settings (state folder, limit overrides).
        id_factory: makes the run id.
        command: the sandbox command.
        pool_lifetime_s: how long the sandbox may wait for its run (0: no warm pool yet); a
            term of its `LifetimeCap`.
        rate_limit_wait_s: the longest rate-limit wait a run may have past its timeout
            (default: the policy's ``rate_limits.max_wait_s``, `max_rate_limit_wait_s`, or 0 for
            a workflow without a model block: it makes no model call); a
            term of its `LifetimeCap` and of the runtime's own deadline (``deadline_s``).

    Raises:
        InputError: the id factory produced an invalid run id, a tool folder of the run is
            not in the snapshot, or the run is too large for ``start`` (`start_message`).
        ValueError: the run has tool folders but no snapshot (a caller's bug).
    """
    run_id = new_run_id(id_factory)
    state_dir = settings.state_dir.resolve()
    manifest = request.registry.manifest(request.policy)
    mounted_tools, tool_paths = tool_mounts(request)
    limits = resource_limits(request.policy, settings)
    if rate_limit_wait_s is None:
        # a workflow without a model block makes no model call, so it never waits on a rate
        # limit: its runtime's own deadline (the watchdog) stays the run's timeout
        has_model = getattr(request.workflow.spec, "model", None) is not None
        rate_limit_wait_s = max_rate_limit_wait_s(request.policy) if has_model else 0.0
    start = request.clock_start
    if start is None:
        start = (
            request.task.clock_start
            if request.task.clock_start is not None
            else (DEFAULT_CLOCK_START)
        )
    run_spec = {
        "run_id": run_id,
        "mode": request.mode,
        "workflow": request.workflow.normalised(),
        "workflow_source": request.workflow.source,
        # the rubric's answer key stays on the host: code under evaluation must not read it
        "task": {k: v for k, v in request.task.record().items() if k != "expected"},
        # record: each call reads the machine's clock (a live wall clock has no step)
        "clock": {"start": start, "step_s": 0.0 if request.mode == "record" else CLOCK_STEP_S},
        "seed": SEED,
        "recorded_calls": [dict(c) for c in request.recorded_calls],
        "fork_at": request.fork_at,
        "tool_paths": tool_paths,
        "modules": _modules(manifest),
        # the host's deadline moves by the rate-limit waits, at most this far: the runtime's
        # watchdog (its backstop) must not end a run the host still lets wait
        "deadline_s": limits.timeout_s + rate_limit_wait_s,
    }
    assert set(run_spec) == set(protocol.RUN_SPEC_KEYS)
    start_message(run_spec, manifest)  # refused here, before any sandbox, when too large
    mounts = runner_mounts()
    mounts += mounted_tools
    env = {
        "TZ": "UTC",
        "PYTHONHASHSEED": str(SEED),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": protocol.RUNTIME_ROOT,
        "HOME": "/tmp",  # noqa: S108 - the sandbox's own tmpfs
        "TMPDIR": "/tmp",  # noqa: S108
        "LANG": "C.UTF-8",
    }
    spec = SandboxSpec(
        run_id=run_id,
        image=request.image,
        command=tuple(command),
        mounts=tuple(mounts),
        env=env,
        limits=limits,
        labels={
            "io.sandbox-replay.task": request.task.task_id[:63],
            **(
                {LEDGER_KEY: request.ledger_key, LEDGER: ledger_id(settings.state_dir)}
                if request.ledger_key
                else {}
            ),
        },
        user=sandbox_user(),
        cap=LifetimeCap(
            limits.timeout_s, pool_lifetime_s=pool_lifetime_s, rate_limit_wait_s=rate_limit_wait_s
        ),
        init=tuple(command) == RUNTIME_COMMAND,  # the runtime is PID 1 (runner.runtime.pid1)
    )
    trace_path = path_for_id(state_dir / "traces", run_id, suffix=".jsonl", kind="run id")
    return PreparedRun(run_id, trace_path, spec, manifest, run_spec)
