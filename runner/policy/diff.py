"""``policy diff``: decide every recorded tool call of some traces under two policies, compare.

Each tool call line of each trace (provider turns, ``model`` / ``user``, are not tool calls) is
decided under the old and the new policy by `runner.policy.calldecision.decide_call`, the one
decision function (its argument layer is the sandbox's call-time evaluator). A call is
*newly denied* when the old policy let it through and the new one does not (an argument rule
denies it, or its tool is no longer resolvable), *newly allowed* the other way round; every
other call is unchanged (still allowed, or still refused). The report also lists, per policy,
the calls whose tool it cannot resolve and the argument rules that matched no call (unused).

Effect classes come from the traces, someone else's files: a tool recorded with more than one
class (``pure`` on one line, ``unsafe`` on the next) has all its calls decided by the strictest
(`STRICTNESS`; no class or an unknown one counts as ``unsafe``), and the disagreement is
reported (``effect_disagreements``), so a lying line cannot make a change look "unchanged".

Traces are hostile input: read line by line through the bounded reader
(`runner.tracetools.reader.TraceLines` over `runner.inputfile.open_input`: regular files only,
size and line limits, strict JSON); a bad line is an `InputError` naming file, line and field.
Examples quote at most `EXAMPLE_CHARS` characters of a call's arguments, as canonical JSON
text; the CLI prints them inert.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.inputfile import open_input
from runner.policy.calldecision import CallVerdict, decide_call
from runner.policy.loader import Policy
from runner.sdk import canonical_json
from runner.tracetools.reader import PROVIDER_ROLES, CallRecord, TraceLines

__all__ = [
    "EXAMPLES_PER_TOOL",
    "EXAMPLE_CHARS",
    "PolicyDiff",
    "RecordedCall",
    "diff_policies",
    "recorded_calls",
    "trace_files",
]

EXAMPLES_PER_TOOL = 3
# Effect classes from the least to the most able to change the world (SPEC.md "effect class").
STRICTNESS = ("pure", "read", "local", "unsafe")
EXAMPLE_CHARS = 300
TRACE_SUFFIXES = (".jsonl",)


@dataclass(frozen=True)
class RecordedCall:
    """One recorded tool call.

    Attributes:
        trace: the trace file as given.
        line: its 1-based line in the trace.
        index: the call index.
        tool: the tool id.
        effect: the effect class the trace recorded (None when it did not).
        args: the arguments (an object; ``{}`` when the record has none).
    """

    trace: str
    line: int
    index: int
    tool: str
    effect: str | None
    args: Any


def trace_files(paths: Sequence[Path]) -> list[Path]:
    """The trace files ``paths`` name: files as given, folders give their ``*.jsonl``, sorted.

    Raises:
        InputError: a path that does not exist, or a folder holding no trace.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.name.endswith(TRACE_SUFFIXES))
            if not inside:
                raise InputError("folder holds no traces (*.jsonl)", file=str(path))
            found.extend(inside)
        elif path.exists():  # a FIFO or a device too: the bounded reader refuses it by name
            found.append(path)
        else:
            raise InputError("no such trace or folder", file=str(path), field="--against")
    return found


def recorded_calls(paths: Iterable[Path]) -> Iterator[RecordedCall]:
    """Every tool call of every trace, in order, read under the trace reader's limits.

    Raises:
        InputError: (while iterating) an unreadable file or a malformed line.
        TraceVersionError: (while iterating) an unknown trace version.
    """
    for path in paths:
        name = str(path)
        with open_input(path, "trace") as stream:
            for lineno, record in TraceLines(stream, file=name):
                if isinstance(record, CallRecord) and record.tool not in PROVIDER_ROLES:
                    yield RecordedCall(
                        name, lineno, record.index, record.tool, record.effect, record.args or {}
                    )


def _example(call: RecordedCall, old: CallVerdict, new: CallVerdict) -> dict[str, Any]:
    text = canonical_json(call.args)
    if len(text) > EXAMPLE_CHARS:
        text = text[:EXAMPLE_CHARS] + f"... ({len(text)} characters)"
    return {
        "trace": call.trace,
        "line": call.line,
        "index": call.index,
        "args": text,
        "old": old.to_json(),
        "new": new.to_json(),
    }


@dataclass
class _Change:
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, call: RecordedCall, old: CallVerdict, new: CallVerdict) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES_PER_TOOL:
            self.examples.append(_example(call, old, new))

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "examples": list(self.examples)}


@dataclass
class _Unresolvable:
    count: int = 0
    rule: str | None = None
    reason: str = ""


@dataclass
class _Side:
    """What one policy did over all calls: unresolvable tools, rules that matched."""

    policy: Policy
    unresolvable: dict[str, _Unresolvable] = field(default_factory=dict)
    matched: set[str] = field(default_factory=set)

    def note(self, tool: str, verdict: CallVerdict) -> None:
        if verdict.outcome == "unresolvable":
            entry = self.unresolvable.setdefault(tool, _Unresolvable())
            entry.count += 1
            entry.rule, entry.reason = verdict.rule, verdict.reason
        elif verdict.matched and verdict.rule is not None:
            self.matched.add(verdict.rule)

    def unused(self) -> list[str]:
        return [name for name in self.policy.rules.names() if name not in self.matched]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.policy.name,
            "source": self.policy.source,
            "hash": self.policy.hash,
            "rules": self.policy.rules.names(),
            "unused_rules": self.unused(),
            "unresolvable": {
                tool: {"count": u.count, "rule": u.rule, "reason": u.reason}
                for tool, u in sorted(self.unresolvable.items())
            },
        }


@dataclass
class PolicyDiff:
    """The comparison of two policies over recorded calls.

    Attributes:
        old, new: what each policy did (unresolvable tools, unused rules).
        traces: the trace files read.
        calls: tool calls decided.
        newly_denied, newly_allowed: per tool, how many calls changed and a few examples.
        unchanged: per tool, ``{"allowed": n, "refused": n}`` of the calls that did not change.
        effects: per tool, the effect classes its calls record (`see`).
    """

    old: _Side
    new: _Side
    traces: list[str] = field(default_factory=list)
    calls: int = 0
    newly_denied: dict[str, _Change] = field(default_factory=dict)
    newly_allowed: dict[str, _Change] = field(default_factory=dict)
    unchanged: dict[str, dict[str, int]] = field(default_factory=dict)
    effects: dict[str, set[str]] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """True when any call is decided differently."""
        return bool(self.newly_denied or self.newly_allowed)

    @property
    def exit_code(self) -> int:
        """0 when nothing changed, 1 when something did (a verdict, SPEC.md exit codes)."""
        return 1 if self.changed else 0

    def add(self, call: RecordedCall) -> tuple[CallVerdict, CallVerdict]:
        """Decide ``call`` under both policies and count it; return both verdicts.

        The call is decided with its tool's strictest recorded class (`strictest`) once
        `see` has been given every call; with a single recorded class that is the call's own.
        """
        effect = self.strictest(call.tool, call.effect)
        old = decide_call(self.old.policy, call.tool, effect, call.args)
        new = decide_call(self.new.policy, call.tool, effect, call.args)
        self.calls += 1
        self.old.note(call.tool, old)
        self.new.note(call.tool, new)
        if old.allowed and not new.allowed:
            self.newly_denied.setdefault(call.tool, _Change()).add(call, old, new)
        elif new.allowed and not old.allowed:
            self.newly_allowed.setdefault(call.tool, _Change()).add(call, old, new)
        else:
            counts = self.unchanged.setdefault(call.tool, {"allowed": 0, "refused": 0})
            counts["allowed" if new.allowed else "refused"] += 1
        return old, new

    def see(self, call: RecordedCall) -> None:
        """Note the effect class ``call`` records for its tool (the first pass)."""
        self.effects.setdefault(call.tool, set()).add(_known(call.effect))

    def strictest(self, tool: str, effect: str | None) -> str:
        """The strictest class recorded for ``tool`` (``effect`` itself when none was seen)."""
        seen = self.effects.get(tool) or {_known(effect)}
        return max(seen, key=STRICTNESS.index)

    def disagreements(self) -> dict[str, list[str]]:
        """Tools recorded with more than one effect class, each with its classes."""
        return {
            tool: sorted(seen, key=STRICTNESS.index)
            for tool, seen in sorted(self.effects.items())
            if len(seen) > 1
        }

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (``policy diff --json``)."""
        return {
            "changed": self.changed,
            "exit_code": self.exit_code,
            "traces": len(self.traces),
            "calls": self.calls,
            "old": self.old.to_json(),
            "new": self.new.to_json(),
            "newly_denied": {t: c.to_json() for t, c in sorted(self.newly_denied.items())},
            "newly_allowed": {t: c.to_json() for t, c in sorted(self.newly_allowed.items())},
            "unchanged": dict(sorted(self.unchanged.items())),
            "effect_disagreements": self.disagreements(),
        }

    def lines(self) -> list[str]:
        """The report as text lines (quoted fields are for the caller to print inert)."""
        out = [
            f"{self.calls} recorded tool call(s) in {len(self.traces)} trace(s): "
            f"{self.old.policy.source} -> {self.new.policy.source}"
        ]
        for label, changes in (
            ("newly denied", self.newly_denied),
            ("newly allowed", self.newly_allowed),
        ):
            for tool, change in sorted(changes.items()):
                out.append(f"{label}: {tool}: {change.count} call(s)")
                for ex in change.examples:
                    side = ex["new"] if label == "newly denied" else ex["old"]
                    out.append(
                        f"  {ex['trace']}:{ex['line']} call #{ex['index']} {ex['args']}"
                        f"  ({side['outcome']}: {side['reason']})"
                    )
        for tool, counts in sorted(self.unchanged.items()):
            out.append(
                f"unchanged: {tool}: {counts['allowed']} allowed, {counts['refused']} refused"
            )
        for side, label in ((self.old, "old"), (self.new, "new")):
            for tool, u in sorted(side.unresolvable.items()):
                out.append(
                    f"unresolvable under the {label} policy: {tool}: {u.count} call(s) ({u.rule})"
                )
            for name in side.unused():
                out.append(f"unused rule of the {label} policy: {name} (matched no call)")
        for tool, seen in self.disagreements().items():
            out.append(
                f"effect classes disagree: {tool} recorded as {', '.join(seen)}: every call"
                f" decided as {seen[-1]}"
            )
        out.append("changed" if self.changed else "no change")
        return out


def _known(effect: str | None) -> str:
    """``effect`` when it is a class of `STRICTNESS`, else ``unsafe`` (fail closed)."""
    return effect if effect in STRICTNESS else "unsafe"


def diff_policies(old: Policy, new: Policy, paths: Sequence[Path]) -> PolicyDiff:
    """Decide every recorded tool call of the traces ``paths`` under ``old`` and ``new``.

    Args:
        old: the policy in force.
        new: the changed policy.
        paths: trace files or folders of ``*.jsonl`` traces.

    Returns:
        The report.

    Raises:
        InputError: a missing path, an empty folder, an unreadable or malformed trace.
        TraceVersionError: a trace of an unknown version.
    """
    files = trace_files(paths)
    report = PolicyDiff(_Side(old), _Side(new), traces=[str(p) for p in files])
    for call in recorded_calls(files):  # first pass: each tool's recorded effect classes
        report.see(call)
    for call in recorded_calls(files):
        report.add(call)
    return report
