"""``sandbox-replay image``: build the sandbox image, and run one sandboxed smoke run."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from runner.cli.app import app, state

image_app = typer.Typer(help="Build and try the sandbox image.", no_args_is_help=True)
app.add_typer(image_app, name="image")


@image_app.command("build")
def build(
    ctx: typer.Context,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Never pull: use the base image when present, else build one with debootstrap.",
        ),
    ] = False,
) -> None:
    """Build the sandbox image (settings: image, base_image, offline_base_image).

    Uses the base image when present (or pullable without --offline), otherwise builds a
    Python base with debootstrap and no registry; says which it did. Exit 6 on failure.
    """
    from runner.backends.docker import DockerBackend
    from runner.backends.docker.image import build_image

    settings = state(ctx).settings()
    backend = DockerBackend.connect(settings.docker_host)
    try:
        build_image(
            backend.api,
            image=settings.image,
            base_image=settings.base_image,
            offline_base_image=settings.offline_base_image,
            offline=offline,
            echo=typer.echo,
            docker_host=settings.docker_host,
        )
    finally:
        backend.close()


@image_app.command("smoke")
def smoke(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run one hardened sandbox through the Docker backend and show what it printed.

    Removes leftover sandboxes of dead owners first (the reaper). Exit 6 when the sandbox
    could not run or did not exit 0.
    """
    from runner.backends.docker import DockerBackend
    from runner.backends.docker.checks import smoke_run
    from runner.episode.reaping import reap_and_settle

    settings = state(ctx).settings()
    backend = DockerBackend.connect(settings.docker_host)
    try:
        reaped = reap_and_settle(backend, settings.state_dir)
        result = smoke_run(backend, settings.image)
    finally:
        backend.close()
    result["reaped"] = [r.name for r in reaped]
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        if reaped:
            typer.echo(f"removed {len(reaped)} leftover sandbox(es) of dead owners")
        typer.echo(result["output"])
        typer.echo(
            f"smoke run: container {result['container']} exited {result['exit_code']} "
            f"in {result['seconds']:.2f} s (created, attached, started, removed)"
        )
    raise typer.Exit(0 if result["exit_code"] == 0 else 6)
