"""``sandbox-replay doctor``: is this machine ready to run sandboxes?

Required checks (exit 6 when any fails): engine reachable (which engine, and why it was chosen:
`runner.backends.docker.engine`); sandbox image present; how the host's files reach sandboxes
(bind mounts or copies through the engine's API, and in copy mode whether the runtime baked
into the image is this host's: `runner.backends.docker.filescheck`); a probe
sandbox with the production hardening runs python3 >= 3.9, non-root, read-only, without
capabilities, and has no route out (checked from inside only). Informational: the seccomp
egress witness (`runner.backends.docker.witnesscheck`), user namespaces, leftover containers.
An unreachable engine is the failed ``engine`` check with its fix; the
checks that need the engine are listed as not run.

``--backend namespace`` checks bubblewrap instead of the engine's sandboxes: bwrap present,
user namespaces allowed, cgroups writable (else rlimits), the image's root filesystem, the
same probe sandbox (`runner.backends.namespace.checks`), each failure with its fix.

``--backend ray`` runs the same checks on every node of the Ray cluster that advertises
sandbox slots, each against that node's own engine (its ``DOCKER_HOST``) and image, and lists
them per node; a node whose checks could not run fails.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from runner.cli.app import app, fail, state
from runner.cli.backend_choice import (
    BackendName,
    BackendOption,
    RayAddressOption,
    chosen_backend,
    ray_backend,
)
from runner.cli.render.terminal import echo
from runner.errors import EXIT_INFRA, EXIT_OK, InfrastructureError, InputError

if TYPE_CHECKING:
    from runner.backends.docker import DockerBackend
    from runner.backends.docker.checks import Check


def _render(check: Check) -> str:
    mark = ("ok" if check.ok else "FAIL") if check.required else ("info" if check.ok else "warn")
    if not check.ran:
        mark = "-"
    line = f"{mark:<5} {check.name:<10} {check.detail}"
    if check.fix and not check.ok and check.ran:
        line += f"\n      {'':<10} fix: {check.fix}"
    return line


def _witness(backend: DockerBackend, image: str) -> Check:
    """The informational ``witness`` check: the seccomp egress witness, probed in a sandbox."""
    # lazy, as in run_checks: the docker SDK and the episode driver cost start-up time
    from runner.backends.docker import witnesscheck as W
    from runner.backends.docker.checks import Check
    from runner.episode.prepare import runner_mounts

    try:
        return W.witness_check(W.run_witness_probe(backend, image, runner_mounts()))
    except InfrastructureError as exc:
        return Check("witness", False, False, f"the witness probe failed: {exc}", W.WITNESS_FIX)


def _files(backend: DockerBackend, image: str, state_dir: Path) -> Check:
    """The required ``files`` check: bind mounts or copies, proven inside a sandbox."""
    # lazy, as in run_checks
    from runner.backends.docker.checks import Check
    from runner.backends.docker.filescheck import FILES_FIX, files_check
    from runner.episode.prepare import runner_mounts

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
) -> list[Check]:
    """Run every doctor check in order.

    Args:
        docker_host: engine address from the settings (None: the engine `discover_engine`
            picks: ``DOCKER_HOST``, the docker context, the default socket, Podman's).
        image: the configured sandbox image.
        runtime: the OCI runtime the settings ask for (``SANDBOX_REPLAY_RUNTIME``), if any.
        host_files: ``auto``, ``bind`` or ``copy`` (``SANDBOX_REPLAY_HOST_FILES``).
        state_dir: the state folder, where the ``files`` check makes its token folder
            (default: a temporary folder).

    An unreachable engine is the failed ``engine`` check; the checks that need the engine are
    listed as not run (``ran`` False), the local ones still run.
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.backends.docker import DockerBackend
    from runner.backends.docker import checks as C
    from runner.backends.docker.client import ENGINE_FIX

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
            C.Check("engine", False, True, detail, fix=str(exc.fields.get("fix", ENGINE_FIX))),
            C.Check("image", False, True, skipped, ran=False),
            C.Check("hardening", False, True, skipped, ran=False),
            C.userns_check(),
            C.Check("leftovers", False, False, skipped, ran=False),
        ]
    try:
        results = [C.engine_check(backend), C.runtimes_check(backend, runtime)]
        image_result = C.image_check(backend, image)
        results.append(image_result)
        if image_result.ok:
            with tempfile.TemporaryDirectory(prefix="sandbox-replay-doctor-") as scratch:
                results.append(_files(backend, image, state_dir or Path(scratch)))
            try:
                results.extend(C.probe_checks(C.run_probe(backend, image)))
            except InfrastructureError as exc:
                results.append(
                    C.Check(
                        "hardening",
                        False,
                        True,
                        f"the probe sandbox failed: {exc}",
                        "see the engine's error above; `docker info` shows the engine's state",
                    )
                )
            results.append(_witness(backend, image))
        else:
            results.append(C.Check("hardening", False, True, "not probed: the image is missing"))
        results.append(C.userns_check())
        results.append(C.leftovers_check(backend))
    finally:
        backend.close()
    return results


def node_checks(address: str | None, image: str) -> dict[str, list[Check] | str]:
    """`run_checks` on every node of the Ray cluster, each on its own engine.

    Returns:
        ``{node id: checks}``, or ``{node id: error text}`` for a node whose checks failed to run.

    Raises:
        InputError: the ray extra is missing or no address was given.
        InfrastructureError: the cluster is unreachable or has no sandbox slots.
    """
    backend = ray_backend(address)
    try:
        answers = backend.call_on_every_node(run_checks, None, image)
    finally:
        backend.close()
    return {n: a if isinstance(a, list) else str(a) for n, a in answers.items()}


def _doctor_ray(address: str | None, image: str, as_json: bool) -> None:
    try:
        nodes = node_checks(address, image)
    except (InfrastructureError, InputError) as exc:
        fail(exc)
    ok = bool(nodes) and all(
        isinstance(r, list) and all(c.ok for c in r if c.required) for r in nodes.values()
    )
    if as_json:
        data = {
            n: [c.as_dict() for c in r] if isinstance(r, list) else {"error": r}
            for n, r in nodes.items()
        }
        echo(json.dumps({"ok": ok, "nodes": data}, indent=2))
    else:
        for node, results in nodes.items():
            echo(f"node {node}")
            if isinstance(results, str):
                echo(f"FAIL  {'node':<10} the checks did not run: {results}")
                continue
            for check in results:
                echo(_render(check))
        echo(
            f"doctor: all required checks passed on {len(nodes)} node(s)"
            if ok
            else "doctor: required checks failed"
        )
    raise typer.Exit(EXIT_OK if ok else EXIT_INFRA)


@app.command()
def doctor(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
    backend: BackendOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Check the Docker engine, the sandbox image and that sandboxes have no route out.

    Exit 0 when every required check passes, 6 otherwise.
    """
    settings = state(ctx).settings()
    chosen = chosen_backend(settings, backend)
    if chosen is BackendName.ray:
        _doctor_ray(ray_address, settings.image, as_json)
    try:
        if chosen is BackendName.namespace:
            # lazy: start-up speed, as in run_checks
            from runner.backends.namespace.checks import namespace_checks

            root = settings.state_dir / "namespace"
            results = namespace_checks(root, settings.image, settings.docker_host)
        else:
            results = run_checks(
                settings.docker_host,
                settings.image,
                settings.runtime,
                settings.host_files,
                settings.state_dir,
            )
    except InfrastructureError as exc:  # the engine failed between two checks
        fail(exc)
    ok = all(c.ok for c in results if c.required)
    if as_json:
        echo(json.dumps({"ok": ok, "checks": [c.as_dict() for c in results]}, indent=2))
    else:
        for check in results:
            echo(_render(check))
        echo("doctor: all required checks passed" if ok else "doctor: required checks failed")
    raise typer.Exit(EXIT_OK if ok else EXIT_INFRA)
