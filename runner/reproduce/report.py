"""The report of one reproduce: the replay compared with its recording, as a `ReproduceReport`.

`compare` reads the replay's trace and puts together what the verdict (`runner.reproduce.diff`)
and the environment diff (`runner.reproduce.envdiff`) say: the outcome and its exit code
(`EXIT_OF`), the first difference with the two calls at its index (bodies capped at
`CALL_CHARS`), the outbound destinations, and both runs' outcomes. The same object is the
``--json`` output, a JUnit test case and the HTML page's data (`runner.cli.render`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.domain.ids import path_under
from runner.domain.words import counted
from runner.episode.request import EpisodeResult
from runner.errors import EXIT_INFRA, EXIT_INPUT, EXIT_NEGATIVE, EXIT_OK, EXIT_REFUSED, InputError
from runner.reproduce.diff import apply_source_verdict, outcome_of, verdict
from runner.reproduce.envdiff import environment_diff, tool_imports
from runner.reproduce.labels import label_of
from runner.tracetools.reader import Trace, read_trace
from runner.wire import observed
from runner.wire.protocol import TOOLS_DIR

if TYPE_CHECKING:
    from runner.domain.registry import Registry

__all__ = [
    "CALL_CHARS",
    "EXIT_OF",
    "NOT_OBSERVED",
    "ReproduceReport",
    "compare",
    "nondeterminism_of",
    "recorded_outcome",
    "strict_determinism",
]

EXIT_OF = {
    "reproduced": EXIT_OK,
    "not_reproduced": EXIT_NEGATIVE,
    "refused": EXIT_REFUSED,
    "invalid": EXIT_INPUT,
    "infra_error": EXIT_INFRA,
}


@dataclass(frozen=True)
class ReproduceReport:
    """The verdict on one trace (also the ``--json`` object and the JUnit test case).

    Attributes:
        input: the argument as given (trace file or packet).
        outcome: ``reproduced``, ``not_reproduced``, ``refused``, ``invalid``, ``infra_error``.
        exit_code: the outcome's exit code (`EXIT_OF`), derived, never given.
        reason: one line saying why.
        first_difference: not_reproduced: the first unrecorded or differing call ``{index,
            tool, args?, kind, message, summary, label, label_rule}`` (``label``: one of
            `runner.reproduce.labels.LABELS`, ``label_rule``: the rule that gave it, in
            words); else None.
        outbound: destinations code in the sandbox tried to reach during the replay.
        outbound_dropped: attempts past the replay's outbound-log cap (the log is incomplete).
        coverage: the replay's log coverage (``full``, ``partial``; None: not said).
        environment_diff: ``[{field, recorded, now}]`` (python, tool schema hashes, workflow
            hash, model ids, packages that matter; the other packages in one summary line).
        recorded, replayed: ``{status, failure, failure_signature, output}`` of each run;
            ``failure`` is ``{call_index, tool, error_class, exit_code, message?,
            message_chars?}`` (the failing call's error message, `runner.reproduce.diff`).
        replay_trace: the replay's own trace file, when it ran.
        trace_sha256: sha256 of the trace file (the same before and after: never modified).
        refusals: every reason strict replay would not start (refused only).
        difference_calls: not_reproduced: ``{"recorded", "replayed"}``, the two calls at the
            first difference's index (trace call lines, None for a side without one; bodies
            capped at `CALL_CHARS` characters), for the side-by-side view.
        nondeterminism: when the replay ran: ``{entries, dropped, not_observed}`` (see
            `nondeterminism_of`), None when the runtime did not report (the run ended first).
    """

    input: str
    outcome: str
    reason: str
    exit_code: int = field(init=False)
    first_difference: dict[str, Any] | None = None
    outbound: list[dict[str, Any]] = field(default_factory=list)
    outbound_dropped: int = 0
    coverage: str | None = None
    environment_diff: list[dict[str, Any]] = field(default_factory=list)
    recorded: dict[str, Any] = field(default_factory=dict)
    replayed: dict[str, Any] = field(default_factory=dict)
    replay_trace: str | None = None
    trace_sha256: str | None = None
    refusals: list[str] = field(default_factory=list)
    difference_calls: dict[str, Any] | None = None
    nondeterminism: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "exit_code", EXIT_OF[self.outcome])  # frozen: set once

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (the ``--json`` output; the HTML page's data)."""
        return asdict(self)


CALL_CHARS = 20_000


def _capped(call: Any) -> dict[str, Any] | None:
    """A call line for the report, its long text fields cut to `CALL_CHARS` (cut said)."""
    if call is None:
        return None
    out: dict[str, Any] = call.to_json()
    for key in ("body",):
        value = out.get(key)
        if isinstance(value, str) and len(value) > CALL_CHARS:
            out[key] = value[:CALL_CHARS]
            out[f"{key}_shown_of"] = len(value)
    return out


def recorded_outcome(trace: Trace) -> dict[str, Any]:
    """``{status, failure, failure_signature, output}`` of the recorded run (`outcome_of`)."""
    return outcome_of(
        trace.end.to_json() if trace.end is not None else None, [c.to_json() for c in trace.calls]
    )


def compare(
    name: str, trace: Trace, registry: Registry, result: EpisodeResult, recorded: dict[str, Any]
) -> ReproduceReport:
    """The report on ``trace`` after its replay ended with ``result``.

    Args:
        name: the input as given (trace file or packet).
        trace: the recorded trace.
        registry: the registry the replay ran with (its tool files: `tool_imports`).
        result: the replay's episode result (its trace is read here).
        recorded: `recorded_outcome` of ``trace``.

    Raises:
        InputError: the replay's own trace cannot be read.
    """
    run = trace.run
    calls = [c.to_json() for c in trace.calls]
    replay = read_trace(result.trace_path)
    replayed_calls = [c.to_json() for c in replay.calls]
    recorded_end = trace.end.to_json() if trace.end is not None else {}
    end = apply_source_verdict(calls, recorded_end, replayed_calls, result.end)
    base: dict[str, Any] = {
        "outbound": list(end.get("outbound") or []),
        "outbound_dropped": int(end.get("outbound_dropped") or 0),
        "coverage": end.get("coverage") if isinstance(end.get("coverage"), str) else None,
        "environment_diff": environment_diff(
            run.environment.to_json(),
            replay.run.environment.to_json(),
            run.workflow.hash,
            replay.run.workflow.hash,
            calls,
            replayed_calls,
            imports=tool_imports(t.file for t in registry if t.has_code),
        ),
        "recorded": recorded,
        "replayed": {
            "run_id": result.run_id,
            **outcome_of(end, replayed_calls),
            **({"source_verdict": True} if end.get("source_verdict") else {}),
        },
        "replay_trace": str(result.trace_path),
        "nondeterminism": nondeterminism_of(end),
    }
    if result.status == "infra_error":
        return ReproduceReport(name, "infra_error", str(end.get("reason")), **base)
    outcome, difference, reason = verdict(calls, recorded_end, replayed_calls, end)
    pair = None
    if difference is not None and isinstance(difference.get("index"), int):
        theirs, mine = trace.call(difference["index"]), replay.call(difference["index"])
        label, rule = label_of(
            difference,
            None if theirs is None else theirs.to_json(),
            None if mine is None else mine.to_json(),
            calls,
            base["environment_diff"],
        )
        difference = {**difference, "label": label, "label_rule": rule}
        pair = {"recorded": _capped(theirs), "replayed": _capped(mine)}
    return ReproduceReport(
        name, outcome, reason, first_difference=difference, difference_calls=pair, **base
    )


NOT_OBSERVED = (
    "C code (extension modules, numpy's generator, clocks read from C)",
    "processes the code started (their outbound attempts are logged)",
    "string hashing and set order (PYTHONHASHSEED)",
    "the monotonic clocks (time.monotonic, perf_counter: durations, timeouts)",
    "code that removes the runtime's hooks",
)
"""What the nondeterminism report cannot see (docs/reproduce.md says why)."""


def nondeterminism_of(end: dict[str, Any]) -> dict[str, Any] | None:
    """The replay's nondeterminism report from its end line, or None when it has none.

    Returns:
        ``{"entries": [{kind, what, count, site?, via?, present?}], "dropped": n,
        "not_observed": [...]}``: the runtime's entries (checked again: the sandbox's word)
        then one ``outbound`` entry per destination of the outbound log (``what``: ``kind
        host:port``), and `NOT_OBSERVED`.
    """
    reported = end.get("nondeterminism")
    if not isinstance(reported, dict):
        return None
    found = observed.report(reported)
    for attempt in end.get("outbound") or []:
        if not isinstance(attempt, dict):
            continue
        where = attempt.get("host") or attempt.get("address")
        count = attempt.get("count")
        found["entries"].append(
            {
                "kind": "outbound",
                "what": f"{attempt.get('kind')} {where}:{attempt.get('port')}"[: observed.MAX_TEXT],
                "count": count if isinstance(count, int) and not isinstance(count, bool) else 1,
            }
        )
    return {**found, "not_observed": list(NOT_OBSERVED)}


def with_host_sites(report: ReproduceReport, roots: Sequence[Path]) -> ReproduceReport:
    """``report`` with each nondeterminism ``site`` in the sandbox's tool folders the user's.

    ``/sandbox/tools/i/agent.py:12`` -> ``ROOT_i/agent.py:12`` (relative to the current
    directory when inside it), where ``roots[i]`` is the folder mounted at
    ``/sandbox/tools/i`` (`runner.tools.snapshot.sources.run_roots`, the mounts' order).

    The site is the sandbox's text: a path is made only through the id rules
    (`runner.domain.ids.path_under`); one that does not follow them, or names another folder
    of the image, stays as it was.
    """
    found = report.nondeterminism
    if not found:
        return report
    entries = [
        {**e, "site": _host_site(e["site"], roots)} if isinstance(e.get("site"), str) else e
        for e in found.get("entries") or []
    ]
    return replace(report, nondeterminism={**found, "entries": entries})


def _host_site(site: str, roots: Sequence[Path]) -> str:
    path, colon, line = site.rpartition(":")
    if not colon or not line.isdigit():
        path, line = site, ""
    prefix = TOOLS_DIR + "/"
    if not path.startswith(prefix):
        return site
    index, _, rest = path[len(prefix) :].partition("/")
    if not index.isdigit() or int(index) >= len(roots) or not rest:
        return site
    try:
        host = path_under(roots[int(index)], rest, kind="tool file")
    except InputError:
        return site
    try:
        shown = str(host.relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(host)
    return f"{shown}:{line}" if line else shown


def strict_determinism(report: ReproduceReport) -> ReproduceReport:
    """``reproduce --strict-determinism``: refuse a replay that read what its trace does not pin.

    Such a replay is ``refused`` (exit 5), each read named in ``refusals``; the replay's own
    verdict stays in ``reason``. A library's own reads do not refuse
    (`runner.wire.observed.refuses`); entries dropped past the cap do (they cannot be told),
    as does a replay whose runtime did not report. Reports of other outcomes (invalid,
    refused, infra_error): unchanged.
    """
    if report.outcome not in ("reproduced", "not_reproduced"):
        return report
    if report.nondeterminism is None:
        reasons = ["the runtime did not report what the replay read (the run ended first)"]
    else:
        entries = report.nondeterminism.get("entries") or []
        reasons = [observed.words(e) for e in entries if observed.refuses(e)]
        dropped = report.nondeterminism.get("dropped") or 0
        if dropped:
            reasons.append(f"{dropped} more not listed")
    if not reasons:
        return report
    reason = (
        f"refused under --strict-determinism: the replay read {counted(len(reasons), 'thing')}"
        f" its trace does not pin (the replay itself: {report.outcome}; {report.reason})"
    )
    return replace(report, outcome="refused", reason=reason, refusals=reasons)
