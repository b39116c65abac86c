"""``--egress-baseline`` / ``--write-egress-baseline`` of ``run``, ``submit`` and ``reproduce``.

One home for the options and for what they do after the command ran: each episode's attempted
destinations (its ``end`` line's ``outbound``) are compared with the baseline
(`runner.policy.egress_baseline`); a destination the baseline does not hold is printed with the
episode that tried it and makes the command exit 1 (a verdict, SPEC.md's exit codes). An
episode whose log is incomplete fails closed the same way: attempts dropped past the log's cap
(``outbound_dropped``) or coverage ``partial`` (a process the log could not see) were never
compared, so the episode is not a pass (the reason printed). Writing a baseline takes every
destination the command's episodes tried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from runner.cli.render.terminal import echo
from runner.errors import EXIT_NEGATIVE, EXIT_OK, InputError

# The commands import this module when the CLI starts (their option types): the baseline and
# trace modules (pydantic, httpx through the trace reader) are imported in the functions that
# use them, so `--help` and `check` stay fast (tests/unit/cli/test_cli_basics.py).

__all__ = [
    "EgressBaselineOption",
    "EpisodeEgress",
    "WriteEgressBaselineOption",
    "check_baseline_file",
    "egress_of_trace",
    "gate_egress",
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


class EpisodeEgress(NamedTuple):
    """What one episode's ``end`` line says of its outbound attempts.

    Attributes:
        name: the episode as printed (a run id, a trace path, ``variant/task#repeat``).
        outbound: the outbound-log entries.
        dropped: attempts past the log's cap (``outbound_dropped``).
        coverage: ``full``, ``partial`` (a process the log could not see), or None (unknown).
    """

    name: str
    outbound: list[dict[str, Any]]
    dropped: int = 0
    coverage: str | None = None

    @classmethod
    def of_end(cls, name: str, end: Mapping[str, Any]) -> EpisodeEgress:
        """The record of an ``end`` line (a mapping, as `EpisodeResult.end` holds it)."""
        dropped = end.get("outbound_dropped")
        coverage = end.get("coverage")
        return cls(
            name,
            [dict(a) for a in end.get("outbound") or [] if isinstance(a, Mapping)],
            dropped if isinstance(dropped, int) and not isinstance(dropped, bool) else 0,
            coverage if isinstance(coverage, str) else None,
        )

    def incomplete(self) -> str | None:
        """Why the log cannot clear the episode, or None when it is complete."""
        if self.dropped > 0:
            return f"{self.dropped} attempts dropped past the outbound log's cap"
        if self.coverage == "partial":
            return "log coverage partial (a process the log could not see)"
        return None


def check_baseline_file(path: Path | None) -> None:
    """Validate ``--egress-baseline`` before anything runs (a bad file costs no sandbox).

    Raises:
        InputError: see `runner.policy.egress_baseline.load_baseline`.
    """
    if path is not None:
        from runner.policy.egress_baseline import load_baseline  # lazy: start-up speed

        load_baseline(path)


def egress_of_trace(path: str | Path) -> EpisodeEgress:
    """The `EpisodeEgress` of the trace at ``path`` (nothing tried when it has no ``end``).

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
        return EpisodeEgress(str(path), [])
    end = lines.end.to_json()
    end["outbound"] = [a.model_dump(exclude_none=True) for a in lines.end.outbound]
    return EpisodeEgress.of_end(str(path), end)


def gate_egress(
    episodes: Sequence[EpisodeEgress],
    *,
    baseline: Path | None,
    write: Path | None,
    err: bool = False,
) -> int:
    """Compare and/or write the baseline for ``episodes``; return 1 when a destination is new.

    Args:
        episodes: what each episode's log says; the names are printed inert.
        baseline: the ``--egress-baseline`` file, or None.
        write: the ``--write-egress-baseline`` file, or None.
        err: print on stderr (the command's stdout is JSON).

    Returns:
        `EXIT_NEGATIVE` when some episode tried a destination the baseline lacks, or its log
        is incomplete (`EpisodeEgress.incomplete`); else `EXIT_OK`.

    Raises:
        InputError: the baseline file is unreadable or invalid, or cannot be written.
    """
    from runner.policy.egress_baseline import (  # lazy: start-up speed
        baseline_from,
        load_baseline,
        new_destinations,
        write_baseline,
    )

    code = EXIT_OK
    if baseline is not None:
        known = load_baseline(baseline)
        for episode in episodes:
            for new in new_destinations(known, episode.outbound):
                code = EXIT_NEGATIVE
                echo(
                    f"new outbound destination: {new['kind']} {new['host']}:{new['port']}"
                    f" (episode {episode.name}; not in {baseline})",
                    err=err,
                )
            why = episode.incomplete()
            if why is not None:  # fail closed: what the log missed was never compared
                code = EXIT_NEGATIVE
                echo(f"egress not cleared: episode {episode.name}: {why}", err=err)
        if code == EXIT_OK:
            echo(f"egress baseline: no new destination ({baseline})", err=err)
    if write is not None:
        document = baseline_from(episode.outbound for episode in episodes)
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
