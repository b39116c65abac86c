"""``sandbox-replay image``: build the sandbox image, and run one sandboxed smoke run.

``image build --json``: the progress lines go to stderr and one JSON object to stdout,
``{"image", "image_id", "base", "base_source", "wheels", "wheelhouse"}`` (`BuildResult`); an
error is ``{"exit_code", "error", ...}`` as every command's (`runner.cli.app.fail`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from runner.backends.docker import DockerBackend
from runner.backends.docker.checks import smoke_run
from runner.backends.docker.image import ImagePackages, build_image
from runner.backends.docker.wheelhouse import probe_target
from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.render.jsonout import print_json
from runner.cli.render.terminal import echo
from runner.domain.workflow import IMAGE_REF
from runner.episode.reaping import reap_and_settle
from runner.errors import InputError, SandboxReplayError

image_app = typer.Typer(help="Build and try the sandbox image.", no_args_is_help=True)
app.add_typer(image_app, name="image")


@image_app.command("build")
def build(
    ctx: typer.Context,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Never pull: use the base image when present, else build one with "
            "debootstrap (Linux, as root; not on macOS or Windows).",
        ),
    ] = False,
    tag: Annotated[
        str | None,
        typer.Option("--tag", help="Image tag to build (default: the image setting)."),
    ] = None,
    requirements: Annotated[
        Path | None,
        typer.Option(
            "--requirements",
            help="pip requirements to install in the image; their wheels are downloaded on "
            "this host (pip download) for the image's Python, then installed with no index.",
            dir_okay=False,
        ),
    ] = None,
    wheelhouse: Annotated[
        Path | None,
        typer.Option(
            "--wheelhouse",
            help="Folder of wheels to install from (default with --requirements: a cache "
            "folder per Python and platform); alone, every wheel in it is installed.",
            file_okay=False,
        ),
    ] = None,
    no_download: Annotated[
        bool,
        typer.Option(
            "--no-download",
            help="Do not run pip download: install from what the wheelhouse already holds.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Build the sandbox image (settings: image, base_image, offline_base_image, cache_dir).

    Uses the base image when present (or pullable without --offline), otherwise builds a
    Python base with debootstrap and no registry; says which it did. With --requirements or
    --wheelhouse your packages are added from wheels this host downloaded: the build itself
    never reaches a registry. Exit 2 for a missing file or an empty wheelhouse, 6 on failure.
    With --json the progress goes to stderr and one JSON object to stdout.
    """
    settings = state(ctx).settings()
    packages = None
    if requirements is not None or wheelhouse is not None:
        packages = ImagePackages(
            requirements=requirements,
            wheelhouse=wheelhouse,
            download=not no_download,
            cache_dir=settings.cache_dir,
        )
    elif no_download:
        raise typer.BadParameter("--no-download needs --requirements or --wheelhouse")

    def progress(line: str) -> None:  # stdout holds the one JSON object with --json
        echo(line, err=as_json)

    target = tag or settings.image
    if len(target) > 255 or not IMAGE_REF.match(target):  # before any pull or build: exit 2
        fail(
            InputError(
                f"{target!r} is not a Docker image reference ([REGISTRY/]NAME[:TAG], lower-case"
                " name, no spaces)",
                field="--tag",
            ),
            as_json=as_json,
        )

    try:
        backend = DockerBackend.connect(settings.docker_host)
        try:
            built = build_image(
                backend.api,
                image=target,
                base_image=settings.base_image,
                offline_base_image=settings.offline_base_image,
                offline=offline,
                echo=progress,
                docker_host=settings.docker_host,
                packages=packages,
                probe=lambda ref: probe_target(backend, ref),
            )
        finally:
            backend.close()
    except SandboxReplayError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        print_json({**asdict(built), "wheels": list(built.wheels), "exit_code": 0})


@image_app.command("smoke")
def smoke(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run one hardened sandbox through the Docker backend and show what it printed.

    Removes leftover sandboxes of dead owners first (the reaper). Exit 6 when the sandbox
    could not run or did not exit 0.
    """
    settings = state(ctx).settings()
    backend = DockerBackend.connect(settings.docker_host)
    try:
        reaped = reap_and_settle(backend, settings.state_dir)
        result = smoke_run(backend, settings.image)
    finally:
        backend.close()
    result["reaped"] = [r.name for r in reaped]
    if as_json:
        echo(json.dumps(result, indent=2))
    else:
        if reaped:
            echo(f"removed {len(reaped)} leftover sandbox(es) of dead owners")
        echo(result["output"])
        echo(
            f"smoke run: container {result['container']} exited {result['exit_code']} "
            f"in {result['seconds']:.2f} s (created, attached, started, removed)"
        )
    raise typer.Exit(0 if result["exit_code"] == 0 else 6)
