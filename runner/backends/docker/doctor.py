"""``sandbox-replay doctor`` of the Docker backend: is this machine's engine ready for sandboxes?

Required checks (exit 6 when any fails): engine reachable (which engine, and why it was chosen:
`runner.backends.docker.engine`); the OCI runtime asked for, when one is; sandbox image
present; how the host's files reach sandboxes (bind mounts or copies through the engine's API,
and in copy mode whether the runtime baked into the image is this host's:
`runner.backends.docker.filescheck`); a probe sandbox with the production hardening runs
python3 >= 3.9, non-root, read-only, without capabilities, and has no route out (checked from
inside only, `runner.backends.doctor`). Informational: the seccomp egress witness
(`runner.backends.docker.witnesscheck`), user namespaces, leftover containers. An unreachable
engine is the failed ``engine`` check with its fix; the checks that need the engine are listed
as not run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from runner.backends.docker import checks as C
from runner.backends.docker import witnesscheck as W
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.client import ENGINE_FIX
from runner.backends.docker.filescheck import FILES_FIX, files_check
from runner.backends.doctor import (
    Check,
    Diagnosis,
    RunnerMounts,
    probe_checks,
    run_probe,
    userns_check,
)
from runner.errors import InfrastructureError

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions
    from runner.settings import Settings

__all__ = ["diagnose", "run_checks"]


def _witness(backend: DockerBackend, image: str, runner_mounts: RunnerMounts) -> Check:
    """The informational ``witness`` check: the seccomp egress witness, probed in a sandbox."""
    try:
        return W.witness_check(W.run_witness_probe(backend, image, runner_mounts()))
    except InfrastructureError as exc:
        return Check("witness", False, False, f"the witness probe failed: {exc}", W.WITNESS_FIX)


def _files(
    backend: DockerBackend, image: str, state_dir: Path, runner_mounts: RunnerMounts
) -> Check:
    """The required ``files`` check: bind mounts or copies, proven inside a sandbox."""
    try:
        return files_check(backend, image, runner_mounts(), state_dir.resolve())
    except (InfrastructureError, OSError) as exc:
        detail = f"{backend.files.describe()}; the files probe failed: {exc}"
        return Check("files", False, True, detail, FILES_FIX)


def run_checks(
    docker_host: str | None,
    image: str,
    runtime: str | None = None,
    host_files: Literal["auto", "bind", "copy"] = "auto",
    state_dir: Path | None = None,
    *,
    runner_mounts: RunnerMounts,
) -> list[Check]:
    """Run every check of the module docstring, in order.

    Args:
        docker_host: engine address from the settings (None: the engine `discover_engine`
            picks: ``DOCKER_HOST``, the docker context, the default socket, Podman's).
        image: the configured sandbox image.
        runtime: the OCI runtime the settings ask for (``SANDBOX_REPLAY_RUNTIME``), if any.
        host_files: ``auto``, ``bind`` or ``copy`` (``SANDBOX_REPLAY_HOST_FILES``).
        state_dir: the state folder, where the ``files`` check makes its token folder
            (default: a temporary folder).
        runner_mounts: makes the runtime's mounts (the files and witness checks mount it).

    An unreachable engine is the failed ``engine`` check; the checks that need the engine are
    listed as not run (``ran`` False), the local ones still run.

    Raises:
        InfrastructureError: the engine failed between two checks.
    """
    try:
        backend = DockerBackend.connect(docker_host, host_files=host_files)
    except InfrastructureError as exc:
        address = exc.fields.get("address", docker_host or "the default address")
        reason = exc.fields.get("reason")
        chosen = exc.fields.get("chosen")
        detail = f"not reachable at {address}" + (f" ({reason})" if reason else "")
        if chosen:
            detail += f", chosen by {chosen}"
        if reason is None:  # another failure than "no engine there": say it whole
            detail = str(exc)
        skipped = "not run: the engine is unreachable"
        return [
            Check("engine", False, True, detail, fix=str(exc.fields.get("fix", ENGINE_FIX))),
            Check("image", False, True, skipped, ran=False),
            Check("hardening", False, True, skipped, ran=False),
            userns_check(),
            Check("leftovers", False, False, skipped, ran=False),
        ]
    try:
        results = [C.engine_check(backend), C.runtimes_check(backend, runtime)]
        image_result = C.image_check(backend, image)
        results.append(image_result)
        if image_result.ok:
            with tempfile.TemporaryDirectory(prefix="sandbox-replay-doctor-") as scratch:
                results.append(_files(backend, image, state_dir or Path(scratch), runner_mounts))
            try:
                results.extend(probe_checks(run_probe(backend, image)))
            except InfrastructureError as exc:
                results.append(
                    Check(
                        "hardening",
                        False,
                        True,
                        f"the probe sandbox failed: {exc}",
                        "see the engine's error above; `docker info` shows the engine's state",
                    )
                )
            results.append(_witness(backend, image, runner_mounts))
        else:
            results.append(Check("hardening", False, True, "not probed: the image is missing"))
        results.append(userns_check())
        results.append(C.leftovers_check(backend))
    finally:
        backend.close()
    return results


def diagnose(settings: Settings, options: BackendOptions, runner_mounts: RunnerMounts) -> Diagnosis:
    """``doctor --backend docker`` (the registry's hook): `run_checks` of the settings.

    The settings' engine, image, runtime, host-files mode and state folder.

    Raises:
        InfrastructureError: the engine failed between two checks.
    """
    return Diagnosis(
        run_checks(
            settings.docker_host,
            settings.image,
            settings.runtime,
            settings.host_files,
            settings.state_dir,
            runner_mounts=runner_mounts,
        )
    )
