"""``sandbox-replay packet TRACE -o FILE.tar.gz [--workflow F]``: a reviewer packet.

The packet holds the trace (redacted: ``--policy``'s ``redaction:`` rules, by default the
built-in detectors; `runner.trace.redact`), the workflow file, the source of its tool modules,
the filtered manifest, the environment manifest and a README with the one command that re-runs it
(`runner.reproduce.packet`); ``sandbox-replay reproduce FILE.tar.gz`` accepts it. The tool
modules are described in a short sandbox, as ``reproduce`` does: never imported here. Exit codes:
0 written, 2 invalid input (unreadable trace, workflow file not found, tools that cannot be
described; nothing written), 6 the engine unusable.

``--json``: one JSON object on stdout, ``{"packet", "files": [member names], "reproduce"}`` (the
command that re-runs it); an error is ``{"exit_code", "error", ...}`` as every command's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from runner.cli.app import app, fail, state
from runner.cli.options import JsonOption
from runner.cli.render.jsonout import print_json
from runner.cli.render.terminal import echo
from runner.domain.words import counted
from runner.errors import SandboxReplayError
from runner.policy import load_policy
from runner.reproduce.packet import build_packet

if TYPE_CHECKING:
    from runner.backends.base import Backend


@app.command("packet")
def packet_command(
    ctx: typer.Context,
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
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="Policy whose redaction rules apply (default: the built-in detectors).",
            metavar="NAME|FILE",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Pack a trace with its workflow and tool code into a packet that reproduce accepts."""
    settings = state(ctx).settings()
    try:
        rules = load_policy(policy).redaction_rules if policy is not None else None
    except SandboxReplayError as exc:
        fail(exc)
    made: list[Backend] = []

    def backend() -> Backend:  # only when there is a module to describe
        # imported on use, not at module top: start-up speed (`--help`, `check`)
        from runner.episode.reaping import connect_here

        made.append(connect_here(settings))
        return made[-1]

    try:
        members = build_packet(
            trace, output, workflow, settings=settings, backend=backend, redaction_rules=rules
        )
    except SandboxReplayError as exc:
        fail(exc)
    finally:
        for each in made:
            each.close()
    again = f"sandbox-replay reproduce {output}"
    if as_json:
        print_json(
            {"packet": str(output), "files": list(members), "reproduce": again, "exit_code": 0}
        )
        return
    echo(f"wrote {output} ({counted(len(members), 'file')})")
    echo(f"re-run it with: {again}")
