"""The checks of ``sandbox-replay doctor`` and the smoke run of ``sandbox-replay image smoke``.

Every network probe runs *inside* a sandbox made by the production backend (network_mode=none):
a TCP connect to a TEST-NET-1 address (192.0.2.1, RFC 5737) must fail with ENETUNREACH and a
name lookup must fail within 2 s. Nothing is ever sent from the host (SPEC.md, network tests).

Checks are values (`Check`); the CLI renders them as text or JSON and picks the exit code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runner.backends import labels as L
from runner.backends.base import STDOUT, Backend, ResourceLimits, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.client import image_fix, retrying
from runner.backends.docker.runtimes import engine_runtimes
from runner.errors import InfrastructureError

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


def engine_check(backend: DockerBackend) -> Check:
    """Engine reachable: address, why it was chosen, server product and version, API version."""
    version = retrying("engine version", backend.api.version, address=backend.address)
    chosen = f" (chosen by {backend.engine.reason})" if backend.engine is not None else ""
    product = "Docker"
    for component in version.get("Components") or ():
        if isinstance(component, dict) and "podman" in str(component.get("Name", "")).lower():
            product = "Podman"
    return Check(
        "engine",
        True,
        True,
        f"{backend.address}{chosen}: {product} {version.get('Version', '?')}, "
        f"API {version.get('ApiVersion', '?')} (client uses {backend.api.api_version})",
    )


def runtimes_check(backend: DockerBackend, wanted: str | None = None) -> Check:
    """``doctor``'s ``runtimes`` line: the engine's runtimes, its default, and ``wanted``'s.

    Informational unless a runtime is asked for (``SANDBOX_REPLAY_RUNTIME``): then it is
    required, and fails when the engine lacks it (the commands would refuse it, exit 2).

    Raises:
        InfrastructureError: the engine failed.
    """
    have = engine_runtimes(backend.api)
    listed = ", ".join(f"{n} (default)" if n == have.default else n for n in have.names)
    detail = f"the engine's OCI runtimes: {listed or 'none listed'}"
    fix = ""
    ok = True
    if wanted is not None:
        ok = wanted in have.names
        detail += f"; SANDBOX_REPLAY_RUNTIME={wanted}" + ("" if ok else " is not among them")
        if not ok:
            fix = (
                f"install {wanted} and register it with dockerd (--add-runtime {wanted}=PATH or"
                ' daemon.json "runtimes"; .ci/ensure-engine.sh does it for crun and runsc), or'
                " unset SANDBOX_REPLAY_RUNTIME"
            )
    return Check("runtimes", ok, wanted is not None, detail, fix)


def image_check(backend: DockerBackend, image: str) -> Check:
    """The sandbox image is present (id, created, version label)."""
    try:
        info = retrying(f"inspect image {image}", backend.api.inspect_image, image)
    except InfrastructureError as exc:
        if exc.fields.get("status") == 404:
            return Check("image", False, True, f"{image} is not present", fix=image_fix())
        raise
    image_labels = (info.get("Config") or {}).get("Labels") or {}
    return Check(
        "image",
        True,
        True,
        f"{image}: {str(info.get('Id', '?'))[:19]}, created {str(info.get('Created', '?'))[:19]}, "
        f"version label {image_labels.get(L.VERSION, '?')}",
    )


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


def leftovers_check(backend: DockerBackend) -> Check:
    """Containers of this project still present (informational; the reaper removes dead ones)."""
    found = backend.containers()
    dead = [
        c
        for c in found
        if (owner := L.owner_from_labels(c.get("Labels") or {})) is not None
        and L.owner_is_dead(owner, this_host=backend.owner.host)
    ]
    return Check(
        "leftovers",
        not dead,
        False,
        f"{len(found)} sandbox container(s) present, {len(dead)} of dead owners",
        "" if not dead else "they are removed at the next run (reaper)",
    )


def smoke_run(backend: DockerBackend, image: str) -> dict[str, Any]:
    """One sandboxed run through the backend: prints a greeting and identity from inside.

    Returns:
        ``{"output": str, "exit_code": int, "seconds": float, "container": str}``.

    Raises:
        InfrastructureError: the sandbox could not run.
    """
    script = (
        "import os, platform, sys; "
        "print('hello from the sandbox: python', platform.python_version(), "
        "'uid', os.getuid(), 'cwd', os.getcwd(), 'HOME', os.environ.get('HOME'))"
    )
    spec = SandboxSpec(
        run_id=f"smoke-{uuid.uuid4().hex[:12]}",
        image=image,
        command=("python3", "-I", "-c", script),
        limits=ResourceLimits(memory_mb=128, pids_limit=32, cpus=0.5, tmpfs_mb=8),
        labels={f"{L.PREFIX}.purpose": "smoke"},
    )
    started = time.monotonic()
    out = bytearray()
    with backend.sandbox(spec) as box:
        for frame in box.frames(poll_s=0.25):
            if frame is not None:
                out += frame[1]
        state = box.wait(30.0)
        name = box.name
    return {
        "output": out.decode("utf-8", "replace").strip(),
        "exit_code": state.exit_code,
        "seconds": round(time.monotonic() - started, 3),
        "container": name,
    }
