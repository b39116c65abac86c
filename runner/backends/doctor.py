"""What ``sandbox-replay doctor`` reports of a backend: checks as values, and the common probe.

Each backend's ``diagnose`` (named by its registry entry, `runner.backends.registry`) returns a
`Diagnosis`; the CLI renders it as text or JSON and picks the exit code (6 when a required
check fails). The probe sandbox is the same for every backend: `run_probe` runs `PROBE_SCRIPT`
in a sandbox with the production hardening and `probe_checks` turns its findings into the
``python``, ``hardening`` and ``network`` checks.

Every network probe runs *inside* a sandbox made by the production backend: a TCP connect to a
TEST-NET-1 address (192.0.2.1, RFC 5737) must fail with ENETUNREACH and a name lookup must fail
within 2 s. Nothing is ever sent from the host (SPEC.md, network tests).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.backends import labels as L
from runner.backends.base import STDOUT, Backend, Mount, ResourceLimits, SandboxSpec
from runner.errors import InfrastructureError

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions
    from runner.settings import Settings

__all__ = [
    "DNS_DEADLINE_S",
    "MIN_PYTHON",
    "PROBE_ADDRESS",
    "PROBE_SCRIPT",
    "Check",
    "Diagnose",
    "Diagnosis",
    "RunnerMounts",
    "probe_checks",
    "run_probe",
    "sandbox_json",
    "userns_check",
]

PROBE_ADDRESS = "192.0.2.1"  # TEST-NET-1: documentation only; never routed off the sandbox
DNS_DEADLINE_S = 2.0
MIN_PYTHON = (3, 9)

# Runs inside the sandbox with python3 -I -c; prints one JSON object.
PROBE_SCRIPT = f"""
import errno, json, os, socket, sys, time
r = {{"python": list(sys.version_info[:3]), "uid": os.getuid()}}
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect(({PROBE_ADDRESS!r}, 80))
    r["connect"] = "connected"
except OSError as e:
    r["connect"] = errno.errorcode.get(e.errno or 0, type(e).__name__)
finally:
    s.close()
t = time.monotonic()
try:
    socket.getaddrinfo("example.com", 443)
    r["dns"] = "resolved"
except OSError as e:
    r["dns"] = type(e).__name__ + ": " + str(e)
r["dns_s"] = round(time.monotonic() - t, 4)
try:
    open("/sandbox-replay-probe", "w").close()
    r["rootfs"] = "writable"
except OSError as e:
    r["rootfs"] = errno.errorcode.get(e.errno or 0, type(e).__name__)
cap = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff:")]
r["cap_eff"] = cap[0] if cap else "?"
print(json.dumps(r))
"""


@dataclass(frozen=True)
class Check:
    """The outcome of one doctor check.

    Attributes:
        name: short id (``engine``, ``image``, ``sandbox``, ``network``, ``userns``, ...).
        ok: passed.
        required: a failure makes doctor exit 6 (informational checks never do).
        detail: what was found.
        fix: what to do when it failed ("" when it passed).
        ran: False when the check could not run (an earlier required check failed).
    """

    name: str
    ok: bool
    required: bool
    detail: str
    fix: str = ""
    ran: bool = True

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    """What ``doctor`` found for one backend.

    Attributes:
        checks: the checks, in order (a cluster's: those of the cluster itself, ``auth``).
        nodes: a cluster's checks per node id (a node whose checks could not run: the error
            text); None for a backend of one machine.
    """

    checks: Sequence[Check]
    nodes: Mapping[str, Sequence[Check] | str] | None = field(default=None)

    @property
    def ok(self) -> bool:
        """Every required check passed (on every node, and a cluster has at least one)."""
        if not all(c.ok for c in self.checks if c.required):
            return False
        if self.nodes is None:
            return True
        return bool(self.nodes) and all(
            not isinstance(r, str) and all(c.ok for c in r if c.required)
            for r in self.nodes.values()
        )


RunnerMounts = Callable[[], Sequence[Mount]]
"""The runtime's mounts (`runner.episode.prepare.runner_mounts`), made where the sandbox runs:
the checks that run the runtime (the files, the witness) mount it."""

Diagnose = Callable[["Settings", "BackendOptions", RunnerMounts], Diagnosis]
"""A backend's ``doctor`` function (`runner.backends.registry.BackendEntry.doctor`)."""


def run_probe(backend: Backend, image: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """Run `PROBE_SCRIPT` in a production-hardened sandbox and return its findings.

    Raises:
        InfrastructureError: the sandbox could not run or printed no JSON.
    """
    spec = SandboxSpec(
        run_id=f"doctor-{uuid.uuid4().hex[:12]}",
        image=image,
        command=("python3", "-I", "-c", PROBE_SCRIPT),
        limits=ResourceLimits(memory_mb=128, pids_limit=32, cpus=0.5, tmpfs_mb=8),
        labels={f"{L.PREFIX}.purpose": "doctor"},
    )
    return sandbox_json(backend, spec, timeout_s)


def sandbox_json(backend: Backend, spec: SandboxSpec, timeout_s: float = 30.0) -> dict[str, Any]:
    """Run ``spec`` and return the JSON object its last line of stdout holds, with its exit code.

    Raises:
        InfrastructureError: the sandbox could not run or printed no JSON object.
    """
    out = bytearray()
    with backend.sandbox(spec) as box:
        deadline = time.monotonic() + timeout_s
        for frame in box.frames(poll_s=0.25):
            if frame is not None:
                out += frame[1] if frame[0] == STDOUT else b""
            if time.monotonic() > deadline:
                break
        state = box.wait(max(0.1, deadline - time.monotonic()))
    text = out.decode("utf-8", "replace").strip()
    try:
        result: dict[str, Any] = json.loads(text.splitlines()[-1])
        if not isinstance(result, dict):
            raise ValueError("not an object")
    except (IndexError, ValueError) as exc:
        raise InfrastructureError(
            f"the probe sandbox printed no result (exit {state.exit_code}, "
            f"killed by host: {state.killed_by_host}): {text[-500:]!r}"
        ) from exc
    result["exit_code"] = state.exit_code
    return result


def probe_checks(probe: dict[str, Any]) -> list[Check]:
    """Turn the probe's findings into the ``sandbox`` and ``network`` checks."""
    py = tuple(probe.get("python") or (0,))
    py_text = ".".join(str(p) for p in py)
    checks = [
        Check(
            "python",
            py >= MIN_PYTHON,
            True,
            f"python3 {py_text} in the image",
            "" if py >= MIN_PYTHON else "rebuild the image from a base with python3 >= 3.9",
        )
    ]
    no_caps = probe.get("cap_eff") == "0" * 16
    hardened = probe.get("uid") != 0 and probe.get("rootfs") == "EROFS" and no_caps
    checks.append(
        Check(
            "hardening",
            hardened,
            True,
            f"uid {probe.get('uid')}, root filesystem write -> {probe.get('rootfs')}, "
            f"CapEff {probe.get('cap_eff')}",
            ""
            if hardened
            else "the engine ignores hardening flags: use a Linux engine with "
            "cgroups and capabilities (rootless or restricted engines may not apply them)",
        )
    )
    dns_s = float(probe.get("dns_s", 99.0))
    no_route = (
        probe.get("connect") == "ENETUNREACH"
        and probe.get("dns") != "resolved"
        and dns_s <= DNS_DEADLINE_S
    )
    checks.append(
        Check(
            "network",
            no_route,
            True,
            f"connect {PROBE_ADDRESS}:80 -> {probe.get('connect')}; name lookup -> "
            f"{probe.get('dns')} in {dns_s:.3f} s (limit {DNS_DEADLINE_S:.0f} s)",
            ""
            if no_route
            else "network_mode=none is not effective on this engine: do not run replays here",
        )
    )
    return checks


def userns_check() -> Check:
    """Unprivileged user namespaces (informational: a later fast backend may use them)."""
    knob = Path("/proc/sys/kernel/unprivileged_userns_clone")
    if knob.exists() and knob.read_text().strip() == "0":
        return Check("userns", False, False, "disabled (kernel.unprivileged_userns_clone=0)")
    unshare = shutil.which("unshare")
    if unshare is None:
        return Check("userns", False, False, "unknown: no `unshare` on PATH (not Linux?)")
    try:
        proc = subprocess.run(
            [unshare, "-rn", "true"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("userns", False, False, f"`unshare -rn true` failed to run: {exc}")
    if proc.returncode == 0:
        return Check("userns", True, False, "available (`unshare -rn true` works)")
    return Check("userns", False, False, f"unavailable: {proc.stderr.strip()[:200]}")
