"""``sandbox-replay packet TRACE -o FILE.tar.gz [--workflow F]``: a reviewer packet.

The packet holds the trace, the workflow file, the source of its tool modules, the filtered
manifest, the environment manifest and a README with the one command that re-runs it
(`runner.orchestrator.packet`); ``sandbox-replay reproduce FILE.tar.gz`` accepts it. Exit codes:
0 written, 2 invalid input (unreadable trace, workflow file not found; nothing written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.app import app, fail
from runner.errors import SandboxReplayError


@app.command("packet")
def packet_command(
    trace: Annotated[Path, typer.Argument(help="The recorded trace.", show_default=False)],
    output: Annotated[
        Path,
        typer.Option(
            "-o", "--output", help="The .tar.gz to write.", metavar="FILE", show_default=False
        ),
    ],
    workflow: Annotated[
        Path | None,
        typer.Option(
            "--workflow", help="The workflow file (default: found by its hash).", metavar="FILE"
        ),
    ] = None,
) -> None:
    """Pack a trace with its workflow and tool code into a packet that reproduce accepts."""
    from runner.orchestrator.packet import build_packet

    try:
        members = build_packet(trace, output, workflow)
    except SandboxReplayError as exc:
        fail(exc)
    typer.echo(f"wrote {output} ({len(members)} files)")
    typer.echo(f"re-run it with: sandbox-replay reproduce {output}")
