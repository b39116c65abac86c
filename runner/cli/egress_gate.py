"""``--egress-baseline`` / ``--write-egress-baseline`` of ``run``, ``submit`` and ``reproduce``.

One home for the options and for what they do after the command ran: each episode's attempted
destinations (its ``end`` line's ``outbound``) are compared with the baseline
(`runner.policy.egress_baseline`); a destination the baseline does not hold is printed with the
episode that tried it and makes the command exit 1 (a verdict, SPEC.md's exit codes). Writing a
baseline takes every destination the command's episodes tried.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from runner.cli.terminal import echo
from runner.errors import EXIT_NEGATIVE, EXIT_OK, InputError

# The commands import this module when the CLI starts (their option types): the baseline and
# trace modules (pydantic, httpx through the trace reader) are imported in the functions that
# use them, so `--help` and `check` stay fast (tests/unit/cli/test_cli_basics.py).

__all__ = [
    "EgressBaselineOption",
    "WriteEgressBaselineOption",
    "check_baseline_file",
    "gate_egress",
    "outbound_of_trace",
]

EgressBaselineOption = Annotated[
    Path | None,
    typer.Option(
        "--egress-baseline",
        help="Fail (exit 1) when an episode tries an outbound destination this file does not"
        " list (JSON: v 1, destinations with host, port and kind; globs allowed).",
        metavar="FILE",
    ),
]
WriteEgressBaselineOption = Annotated[
    Path | None,
    typer.Option(
        "--write-egress-baseline",
        help="Write every outbound destination the episodes tried to FILE (a new baseline).",
        metavar="FILE",
    ),
]


def check_baseline_file(path: Path | None) -> None:
    """Validate ``--egress-baseline`` before anything runs (a bad file costs no sandbox).

    Raises:
        InputError: see `runner.policy.egress_baseline.load_baseline`.
    """
    if path is not None:
        from runner.policy.egress_baseline import load_baseline  # lazy: start-up speed

        load_baseline(path)


def outbound_of_trace(path: str | Path) -> list[dict[str, Any]]:
    """The ``end`` line's outbound-log entries of the trace at ``path`` (empty without one).

    Raises:
        InputError: the trace is unreadable or malformed (file, line, field).
    """
    from runner.inputfile import open_input  # lazy: start-up speed
    from runner.tracetools.reader import TraceLines

    with open_input(path, "trace") as stream:
        lines = TraceLines(stream, file=str(path))
        for _ in lines:
            pass
    if lines.end is None:
        return []
    return [attempt.model_dump(exclude_none=True) for attempt in lines.end.outbound]


def gate_egress(
    episodes: Sequence[tuple[str, Iterable[Mapping[str, Any]]]],
    *,
    baseline: Path | None,
    write: Path | None,
    err: bool = False,
) -> int:
    """Compare and/or write the baseline for ``episodes``; return 1 when a destination is new.

    Args:
        episodes: (name, outbound-log entries) per episode; the name (a run id, a trace path)
            is printed inert.
        baseline: the ``--egress-baseline`` file, or None.
        write: the ``--write-egress-baseline`` file, or None.
        err: print on stderr (the command's stdout is JSON).

    Returns:
        `EXIT_NEGATIVE` when some episode tried a destination the baseline lacks, else `EXIT_OK`.

    Raises:
        InputError: the baseline file is unreadable or invalid, or cannot be written.
    """
    from runner.policy.egress_baseline import (  # lazy: start-up speed
        baseline_from,
        load_baseline,
        new_destinations,
        write_baseline,
    )

    episodes = [(name, list(outbound)) for name, outbound in episodes]
    code = EXIT_OK
    if baseline is not None:
        known = load_baseline(baseline)
        for name, outbound in episodes:
            for new in new_destinations(known, outbound):
                code = EXIT_NEGATIVE
                echo(
                    f"new outbound destination: {new['kind']} {new['host']}:{new['port']}"
                    f" (episode {name}; not in {baseline})",
                    err=err,
                )
        if code == EXIT_OK:
            echo(f"egress baseline: no new destination ({baseline})", err=err)
    if write is not None:
        document = baseline_from(outbound for _, outbound in episodes)
        try:
            write_baseline(write, document)
        except OSError as exc:
            raise InputError(
                f"cannot write the egress baseline: {exc.strerror or exc}",
                file=str(write),
                field="--write-egress-baseline",
            ) from None
        echo(
            f"egress baseline written: {write} ({len(document['destinations'])} destinations)",
            err=err,
        )
    return code
