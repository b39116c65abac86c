"""The egress gate: each episode's attempted destinations against a baseline, fail closed.

What ``--egress-baseline`` / ``--write-egress-baseline`` do after ``run``, ``submit`` or
``reproduce`` ran: each episode's attempted destinations (its ``end`` line's ``outbound``) are
compared with the baseline (`runner.policy.egress_baseline`); a destination the baseline does
not hold names the episode that tried it and makes the verdict `EXIT_NEGATIVE` (exit 1, a
verdict: SPEC.md's exit codes). An episode whose log is incomplete fails closed the same way:
attempts dropped past the log's cap (``outbound_dropped``) or coverage ``partial`` (a process
the log could not see) were never compared, so the episode is not a pass (the reason said).
Writing a baseline takes every destination the command's episodes tried. The lines are the
caller's to print (`runner.cli.egress_gate`); every field in them came from a sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from runner.domain.words import counted
from runner.errors import EXIT_NEGATIVE, EXIT_OK, InputError
from runner.inputfile import open_input
from runner.policy.egress_baseline import (
    baseline_from,
    load_baseline,
    new_destinations,
    write_baseline,
)
from runner.tracetools.reader import TraceLines

__all__ = ["EgressVerdict", "EpisodeEgress", "check_egress", "egress_of_trace"]


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
            return f"{counted(self.dropped, 'attempt')} dropped past the outbound log's cap"
        if self.coverage == "partial":
            return "log coverage partial (a process the log could not see)"
        return None


def egress_of_trace(path: str | Path) -> EpisodeEgress:
    """The `EpisodeEgress` of the trace at ``path`` (nothing tried when it has no ``end``).

    Raises:
        InputError: the trace is unreadable or malformed (file, line, field).
    """
    with open_input(path, "trace") as stream:
        lines = TraceLines(stream, file=str(path))
        for _ in lines:
            pass
    if lines.end is None:
        return EpisodeEgress(str(path), [])
    end = lines.end.to_json()
    end["outbound"] = [a.model_dump(exclude_none=True) for a in lines.end.outbound]
    return EpisodeEgress.of_end(str(path), end)


@dataclass(frozen=True)
class EgressVerdict:
    """What the gate found.

    Attributes:
        exit_code: `EXIT_NEGATIVE` when an episode tried a destination the baseline lacks or
            its log is incomplete; else `EXIT_OK`.
        lines: what to say, in order (fields from sandboxes: print them inert).
        write_error: the baseline could not be written (raise it after saying ``lines``).
    """

    exit_code: int
    lines: tuple[str, ...]
    write_error: InputError | None = None


def check_egress(
    episodes: Sequence[EpisodeEgress], *, baseline: Path | None, write: Path | None
) -> EgressVerdict:
    """Compare ``episodes`` with the baseline and/or write a new one.

    Args:
        episodes: what each episode's log says.
        baseline: the ``--egress-baseline`` file, or None.
        write: the ``--write-egress-baseline`` file, or None.

    Returns:
        The verdict and its lines.

    Raises:
        InputError: the baseline file is unreadable or invalid (a file that cannot be written
            is `EgressVerdict.write_error`).
    """
    code = EXIT_OK
    lines: list[str] = []
    if baseline is not None:
        known = load_baseline(baseline)
        for episode in episodes:
            for new in new_destinations(known, episode.outbound):
                code = EXIT_NEGATIVE
                lines.append(
                    f"new outbound destination: {new['kind']} {new['host']}:{new['port']}"
                    f" (episode {episode.name}; not in {baseline})"
                )
            why = episode.incomplete()
            if why is not None:  # fail closed: what the log missed was never compared
                code = EXIT_NEGATIVE
                lines.append(f"egress not cleared: episode {episode.name}: {why}")
        if code == EXIT_OK:
            lines.append(f"egress baseline: no new destination ({baseline})")
    if write is not None:
        document = baseline_from(episode.outbound for episode in episodes)
        try:
            write_baseline(write, document)
        except OSError as exc:
            error = InputError(
                f"cannot write the egress baseline: {exc.strerror or exc}",
                file=str(write),
                field="--write-egress-baseline",
            )
            return EgressVerdict(code, tuple(lines), error)
        lines.append(
            f"egress baseline written: {write}"
            f" ({counted(len(document['destinations']), 'destination')})"
        )
    return EgressVerdict(code, tuple(lines))
