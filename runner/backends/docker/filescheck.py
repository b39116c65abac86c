"""``doctor``'s ``files`` check: how the host's files reach sandboxes, proven from inside one.

The check decides the backend's host-files mode as a run would (`HostFiles.mode`: the probe in
``auto``), then runs one production-hardened sandbox that mounts the runtime and a folder
holding a fresh random token, the way a run mounts its tool snapshot, and reads both from
inside: the token must be the host's, the runtime must import. In copy mode it also reports the
runtime image and whether the runtime baked into it is this host's (its digest label against
the digest of the runtime this host would mount).
"""

from __future__ import annotations

import secrets
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner.backends import labels as L
from runner.backends.base import Mount, ResourceLimits, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.backends.doctor import Check, sandbox_json
from runner.wire import protocol

__all__ = ["FILES_FIX", "files_check"]

FILES_FIX = (
    "set SANDBOX_REPLAY_HOST_FILES=copy for an engine that cannot see this host's folders "
    "(remote DOCKER_HOST, dind, Docker Desktop outside its file sharing), or =bind when it can"
)
_NONCE_FILE = "doctor-nonce"
_READ_SCRIPT = f"""
import json, sys
r = {{}}
try:
    r["token"] = open("{protocol.TOOLS_DIR}/0/{_NONCE_FILE}").read()
except OSError as e:
    r["token_error"] = str(e)
try:
    import runner.wire.protocol as p
    r["protocol"] = p.PROTOCOL_VERSION
except Exception as e:
    r["runtime_error"] = repr(e)
print(json.dumps(r))
"""


def _read_in_sandbox(backend: DockerBackend, image: str, mounts: Sequence[Mount]) -> dict[str, Any]:
    spec = SandboxSpec(
        run_id=f"doctor-files-{uuid.uuid4().hex[:12]}",
        image=image,
        command=("python3", "-s", "-c", _READ_SCRIPT),
        mounts=tuple(mounts),
        env={"PYTHONPATH": protocol.RUNTIME_ROOT},
        limits=ResourceLimits(memory_mb=128, pids_limit=32, cpus=0.5, tmpfs_mb=8),
        labels={f"{L.PREFIX}.purpose": "doctor"},
    )
    return sandbox_json(backend, spec, timeout_s=60.0)


def files_check(
    backend: DockerBackend, image: str, runtime_mounts: Sequence[Mount], scratch: Path
) -> Check:
    """The required ``files`` check (see the module docstring).

    Args:
        backend: the connected backend (its ``files`` mode is decided here if not yet).
        image: the sandbox image.
        runtime_mounts: the runtime's mounts, as a run has them.
        scratch: a folder of this host where runs' files live (the state folder): the token
            folder is made under it, like the tool snapshots, and removed after.

    Raises:
        InfrastructureError: the engine failed otherwise than by not seeing the files.
    """
    folder = scratch / "doctor" / uuid.uuid4().hex[:12]
    folder.mkdir(parents=True)
    token = secrets.token_hex(16)
    try:
        (folder / _NONCE_FILE).write_text(token, encoding="utf-8")
        mounts = [*runtime_mounts, Mount(folder, f"{protocol.TOOLS_DIR}/0")]
        mode = backend.files.mode(image, mounts)
        how = backend.files.describe()
        detail = f"{how}"
        ok = True
        if mode == "copy":
            runtime = backend.files.runtime_images.ensure(image, runtime_mounts)
            ok = runtime.matches
            detail += (
                f"; runtime image {runtime.tag} carries runtime {runtime.found[:12] or 'none'} "
                f"(sandbox-replay {runtime.version}), this host's is {runtime.digest[:12]}"
                + (" (built now)" if runtime.built else "")
            )
        seen = _read_in_sandbox(backend, image, mounts)
    finally:
        try:
            backend.files.discard(folder)  # copy mode: the token's one-off volume
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    if seen.get("token") != token:
        ok = False
        detail += (
            f"; a sandbox did not read the host's token ({seen.get('token_error', 'differs')})"
        )
    if "protocol" not in seen:
        ok = False
        detail += f"; the runtime does not import in a sandbox ({seen.get('runtime_error')})"
    return Check("files", ok, True, detail, "" if ok else FILES_FIX)
