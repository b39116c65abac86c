"""Whether the egress witness works in this engine's sandboxes (``doctor``), measured in one.

Runs ``python3 -m runner.runtime.egress.probe`` (`runner.runtime.egress`) in a sandbox made by
the production backend, with the sandbox side of ``runner`` mounted: a child installs the
seccomp user-notification filter on itself and connects to ``203.0.113.1:9`` (TEST-NET-3,
never routed; the sandbox has no network anyway); the witness must log that address and answer
``ENETUNREACH``. When it cannot (a kernel without the listener, an engine profile that denies
``seccomp()`` or the notification ioctls, a ``/proc`` that hides the worker's memory), the
probe's reason is the check's detail and the outbound log's coverage stays ``partial``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from runner.backends import labels as L
from runner.backends.base import STDOUT, Mount, ResourceLimits, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.backends.doctor import Check
from runner.errors import InfrastructureError
from runner.wire.protocol import RUNTIME_ROOT

__all__ = ["MAX_PROBE_OUTPUT", "run_witness_probe", "witness_check"]

MAX_PROBE_OUTPUT = 1 << 20  # bytes of the probe's stdout kept
_ENTRY = (
    f"import sys; sys.path.insert(0, {RUNTIME_ROOT!r}); "
    "from runner.runtime.egress.probe import main; sys.exit(main(sys.argv[1:]))"
)
WITNESS_FIX = (
    "the run's outbound log stays coverage `partial` for non-Python children and ctypes; "
    "a Linux >= 5.9 kernel and an engine whose seccomp profile allows seccomp() "
    "(Docker's default does) make it `full`"
)


def run_witness_probe(
    backend: DockerBackend,
    image: str,
    mounts: Sequence[Mount],
    command: Sequence[str] = (),
    gateway: int | None = None,
    not_dumpable: bool = False,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """Run ``command`` (default: the probe's self-test) under the witness in a sandbox.

    ``not_dumpable``: the probe (the runtime's stand-in) makes itself not dumpable first.

    Returns:
        The probe's summary (``usable``, ``reason``, ``exit``, ``install_us``, ``answered``,
        ``stdout``) with ``attempts``: the logged attempt dicts, in order.

    Raises:
        InfrastructureError: the sandbox could not run or printed no summary.
    """
    argv = ["python3", "-I", "-c", _ENTRY]
    if not_dumpable:
        argv.append("--not-dumpable")
    if gateway is not None:
        argv += ["--gateway", str(gateway)]
    spec = SandboxSpec(
        run_id=f"witness-{uuid.uuid4().hex[:12]}",
        image=image,
        command=(*argv, *command),
        mounts=tuple(mounts),
        limits=ResourceLimits(memory_mb=256, pids_limit=64, cpus=1.0, tmpfs_mb=16),
        labels={f"{L.PREFIX}.purpose": "doctor"},
        workdir=RUNTIME_ROOT,
    )
    out, err = bytearray(), bytearray()
    with backend.sandbox(spec) as box:
        deadline = time.monotonic() + timeout_s
        for frame in box.frames(poll_s=0.25):
            if frame is not None and len(out) < MAX_PROBE_OUTPUT:
                (out if frame[0] == STDOUT else err).extend(frame[1])
            if time.monotonic() > deadline:
                break
        state = box.wait(max(0.1, deadline - time.monotonic()))
    lines = out.decode("utf-8", "replace").strip().splitlines()
    try:  # hostile output: a summary object and attempt objects, or nothing
        result = json.loads(lines[-1])
        attempts = [json.loads(line)["attempt"] for line in lines[:-1]]
        if not isinstance(result, dict) or not all(isinstance(a, dict) for a in attempts):
            raise TypeError("not objects")
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        raise InfrastructureError(
            f"the witness probe printed no result (exit {state.exit_code}): "
            f"{bytes(out[-300:])!r}, stderr {bytes(err[-500:])!r}"
        ) from exc
    result["attempts"] = attempts
    return result


def witness_check(probe: dict[str, Any]) -> Check:
    """The ``witness`` check (informational) from `run_witness_probe`'s self-test result."""
    if probe.get("usable"):
        return Check(
            "witness",
            True,
            False,
            "seccomp egress witness usable: outbound log coverage `full` (worker bootstrap "
            f"{int(probe.get('install_us', 0)) / 1000:.1f} ms CPU, imports included)",
        )
    reason = str(probe.get("reason") or "the self-test connect was not witnessed")[:300]
    return Check("witness", False, False, f"egress witness unusable: {reason}", WITNESS_FIX)
