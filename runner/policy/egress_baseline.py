"""The egress baseline: the outbound destinations a workflow is known to try.

A gate that fails when an episode *tries* a destination it never tried before, even when the
episode copes with the refusal (the sandbox has no network, so every attempt fails; the attempt
itself is the new outbound dependency). The file is JSON::

    {"v": 1, "destinations": [{"host": "api.example.com", "port": 443, "kind": "connect"}]}

``host`` and ``port`` may be shell-style globs (`fnmatch`: ``*.example.com``, ``*``, ``44?``),
matched case-insensitively against the attempt's host (or, when it has none, its address) and
its port as text; ``kind`` (``connect``, ``getaddrinfo``, ``sendto``, ... as the outbound log
names them; `runner.runtime.egress`) may be a glob too and defaults to ``*``.

Attempts come from the ``end`` line's ``outbound`` list (`runner.tracetools.records.EndRecord`):
hostile input, so only their scalar fields are read and nothing of them is executed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import InputError
from runner.inputfile import read_input
from runner.trace.strictjson import StrictJSONError, loads

__all__ = [
    "BaselineDestination",
    "EgressBaseline",
    "baseline_from",
    "destination_of",
    "glob_escape",
    "load_baseline",
    "new_destinations",
    "write_baseline",
]

MAX_DESTINATIONS = 10_000
"""Entries a baseline may hold (a file with more is refused: exit 2)."""


class BaselineDestination(BaseModel):
    """One known destination; ``host`` and ``port`` may be globs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1, max_length=512)
    port: int | str = "*"
    kind: str = Field(default="*", min_length=1, max_length=64)

    def matches(self, attempt: Mapping[str, str]) -> bool:
        """True when ``attempt`` (a `destination_of` result) is this destination."""
        return (
            fnmatchcase(attempt["kind"], self.kind.lower())
            and fnmatchcase(attempt["host"], self.host.lower())
            and fnmatchcase(attempt["port"], str(self.port).lower())
        )


class EgressBaseline(BaseModel):
    """The baseline file: format version 1 and the known destinations."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1]
    destinations: tuple[BaselineDestination, ...] = Field(max_length=MAX_DESTINATIONS)


def destination_of(attempt: Mapping[str, Any]) -> dict[str, str]:
    """An outbound-log entry as ``{"kind", "host", "port"}`` text, lower-cased for matching.

    The host is the entry's ``host``, else its ``address`` (the destination key of
    `runner.runtime.egress.events.destination_key`); a missing field is the empty string.
    """
    host = attempt.get("host")
    if host is None:
        host = attempt.get("address")
    port = attempt.get("port")
    return {
        "kind": str(attempt.get("kind") or "")[:64].lower(),
        "host": str(host if host is not None else "")[:512].lower(),
        "port": "" if port is None else str(port)[:16].lower(),
    }


def new_destinations(
    baseline: EgressBaseline, outbound: Iterable[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """The destinations of ``outbound`` that no baseline entry matches, each once, in order.

    Args:
        baseline: the known destinations.
        outbound: an episode's outbound-log entries (the ``end`` line's ``outbound``).

    Returns:
        ``{"kind", "host", "port"}`` dicts (text, lower-cased), first-seen order, no repeats.
    """
    found: list[dict[str, str]] = []
    for attempt in outbound:
        if not isinstance(attempt, Mapping):
            continue
        destination = destination_of(attempt)
        if destination in found:
            continue
        if not any(known.matches(destination) for known in baseline.destinations):
            found.append(destination)
    return found


def baseline_from(outbounds: Iterable[Iterable[Mapping[str, Any]]]) -> dict[str, Any]:
    """A baseline document (``{"v": 1, "destinations": [...]}``) of every destination tried.

    Each value is written as a pattern of itself (`glob_escape`): a recorded ``*`` is no glob.

    Args:
        outbounds: the outbound-log entries of each episode.

    Returns:
        The JSON document, destinations sorted by (host, port, kind), each once; a port that is
        a number is written as one.
    """
    seen: set[tuple[str, str, str]] = set()
    for outbound in outbounds:
        for attempt in outbound:
            if isinstance(attempt, Mapping):
                d = destination_of(attempt)
                seen.add((d["host"], d["port"], d["kind"]))
    destinations = [
        {
            "host": glob_escape(host),
            "port": int(port) if port.isdigit() else (glob_escape(port) if port else "*"),
            "kind": glob_escape(kind),
        }
        for host, port, kind in sorted(seen)
    ]
    return {"v": 1, "destinations": destinations}


def glob_escape(value: str) -> str:
    """``value`` as an `fnmatch` pattern that matches only itself (``*`` → ``[*]``, ...).

    A written baseline holds what episodes tried, and code under evaluation chooses that: an
    attempt at host ``*`` must not become a wildcard that passes every later destination.
    """
    return "".join(f"[{c}]" if c in "*?[" else c for c in value)


def load_baseline(path: str | Path) -> EgressBaseline:
    """Read and validate an egress baseline file.

    Raises:
        InputError: unreadable, larger than its limit (`runner.inputfile.LIMITS`), not strict
            JSON, or a field that does not fit (named, e.g. ``destinations.3.host``).
    """
    name = str(path)
    data = read_input(name, "egress baseline")
    try:
        doc = loads(data)
    except (StrictJSONError, UnicodeDecodeError) as exc:
        raise InputError(f"not strict JSON: {exc}", file=name, what="egress baseline") from None
    try:
        return EgressBaseline.model_validate(doc)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or None
        raise InputError(
            f"not an egress baseline: {error['msg']}", file=name, field=field
        ) from None


def write_baseline(path: str | Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically (a temporary file renamed over it)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, indent=2, ensure_ascii=True) + "\n", "utf-8")
    os.replace(temporary, target)
