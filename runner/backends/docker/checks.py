"""The Docker engine's checks of ``sandbox-replay doctor`` and the smoke run of ``image smoke``.

The engine, its OCI runtimes, the image and leftover containers; the probe sandbox and the
checks every backend shares are `runner.backends.doctor`'s (`Check` values the CLI renders).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from runner.backends import labels as L
from runner.backends.base import ResourceLimits, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.client import image_fix, retrying
from runner.backends.docker.runtimes import engine_runtimes
from runner.backends.doctor import Check
from runner.errors import InfrastructureError


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
