"""``--egress-baseline`` / ``--write-egress-baseline`` of ``run``, ``submit`` and ``reproduce``.

The options, the early check of the baseline file, and the gate's lines printed inert: what the
gate decides is `runner.policy.egress_gate`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from runner.cli.render.terminal import echo
from runner.policy.egress_baseline import load_baseline
from runner.policy.egress_gate import EgressVerdict, EpisodeEgress, check_egress

__all__ = [
    "EgressBaselineOption",
    "WriteEgressBaselineOption",
    "check_baseline_file",
    "gate_egress",
    "print_verdict",
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
        load_baseline(path)


def print_verdict(verdict: EgressVerdict, *, err: bool = False) -> int:
    """Say the gate's lines (on stderr when ``err``: stdout is JSON); return its exit code.

    Raises:
        InputError: the baseline could not be written (`EgressVerdict.write_error`).
    """
    for line in verdict.lines:
        echo(line, err=err)
    if verdict.write_error is not None:
        raise verdict.write_error
    return verdict.exit_code


def gate_egress(
    episodes: Sequence[EpisodeEgress],
    *,
    baseline: Path | None,
    write: Path | None,
    err: bool = False,
) -> int:
    """`check_egress` over ``episodes``, its lines printed; return its exit code.

    Raises:
        InputError: the baseline file is unreadable or invalid, or cannot be written.
    """
    return print_verdict(check_egress(episodes, baseline=baseline, write=write), err=err)
