"""``sandbox-replay doctor``: is this machine ready to run sandboxes?

The chosen backend (``--backend``, else ``SANDBOX_REPLAY_BACKEND``) says what it checks: its
registry entry's ``diagnose`` (`runner.backends.registry`). ``docker``: the engine (which one,
and why), its runtimes, the image, how the host's files reach sandboxes, a probe sandbox with
the production hardening and no route out, the egress witness, user namespaces, leftovers
(`runner.backends.docker.doctor`). ``namespace``: bubblewrap, user namespaces, cgroups, the
image's root filesystem, the same probe sandbox (`runner.backends.namespace.checks`). ``ray``:
whether the cluster authenticates its clients (``auth``; a cluster that does not is not joined
unless ``--unsafe-open-cluster``), then the Docker checks on every node
(`runner.backends.ray.doctor`), listed per node. Each failure comes with its fix.

Exit 0 when every required check passes, 6 otherwise (a cluster: on every node, and at least
one node).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.backend_choice import (
    BackendOption,
    RayAddressOption,
    UnsafeOpenClusterOption,
    backend_options,
    chosen_backend,
)
from runner.cli.render.terminal import echo
from runner.errors import EXIT_INFRA, EXIT_OK, InfrastructureError, InputError

if TYPE_CHECKING:
    from runner.backends.doctor import Check, Diagnosis


def _render(check: Check) -> str:
    mark = ("ok" if check.ok else "FAIL") if check.required else ("info" if check.ok else "warn")
    if not check.ran:
        mark = "-"
    line = f"{mark:<5} {check.name:<10} {check.detail}"
    if check.fix and not check.ok and check.ran:
        line += f"\n      {'':<10} fix: {check.fix}"
    return line


def _print(found: Diagnosis, as_json: bool) -> None:
    if as_json:
        data: dict[str, object] = {"ok": found.ok, "checks": [c.as_dict() for c in found.checks]}
        if found.nodes is not None:
            data["nodes"] = {
                n: {"error": r} if isinstance(r, str) else [c.as_dict() for c in r]
                for n, r in found.nodes.items()
            }
        echo(json.dumps(data, indent=2))
        return
    for check in found.checks:
        echo(_render(check))
    for node, results in (found.nodes or {}).items():
        echo(f"node {node}")
        if isinstance(results, str):
            echo(f"FAIL  {'node':<10} the checks did not run: {results}")
            continue
        for check in results:
            echo(_render(check))
    if not found.ok:
        echo("doctor: required checks failed")
    elif found.nodes is not None:
        echo(f"doctor: all required checks passed on {len(found.nodes)} node(s)")
    else:
        echo("doctor: all required checks passed")


@app.command()
def doctor(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
    backend: BackendOption = None,
    ray_address: RayAddressOption = None,
    unsafe_open_cluster: UnsafeOpenClusterOption = False,
) -> None:
    """Check the backend (default Docker), the sandbox image and that sandboxes are cut off.

    Exit 0 when every required check passes, 6 otherwise.
    """
    # imported on use, not at module top: start-up speed (`--help`, `check`)
    from runner.backends.registry import load
    from runner.episode.prepare import runner_mounts

    settings = state(ctx).settings()
    try:
        chosen = chosen_backend(settings, backend)
        options = backend_options(
            chosen,
            {"--ray-address": ray_address, "--unsafe-open-cluster": unsafe_open_cluster},
        )
        if not chosen.doctor:
            raise InputError(f"doctor has nothing to check of --backend {chosen.name}")
        diagnose = load(chosen.doctor, extra=chosen.extra, backend=chosen.name)
        found: Diagnosis = diagnose(settings, options, runner_mounts)
    except (InfrastructureError, InputError) as exc:  # the engine failed between two checks
        fail(exc)
    _print(found, as_json)
    raise typer.Exit(EXIT_OK if found.ok else EXIT_INFRA)
