"""The nondeterminism report as it crosses: worker -> runtime -> host. Standard library only.

The worker (`runner.runtime.nondeterminism`) counts what the user's code read that the trace
does not pin; the runtime keeps the entries it is sent (`runner.runtime.worker.client`) and
sends them once, in mode ``reproduce``, as the ``nondeterminism`` message; the host writes them
in the trace's end line (`runner.episode.tracelines`). Each side checks them with `entry` and
`report`: they come from the process that runs the user's code.
"""

from typing import Any, Dict, List, Optional

__all__ = ["BY", "KINDS", "MAX_ENTRIES", "MAX_TEXT", "entry", "refuses", "report", "words"]

KINDS = ("wall_clock", "randomness", "environment_variable", "file_read")
"""What the sandbox reports (the host adds ``outbound``, from the egress log)."""

MAX_ENTRIES = 100
"""Distinct ``(kind, what)`` entries kept; past them only ``dropped`` counts."""

MAX_TEXT = 300
"""Characters kept of ``what``, ``site`` and ``via``."""

BY = ("code", "package", "stdlib")
"""Who read: the run's own code (the tool snapshot: tools, agent), an installed package, or
the standard library's own lookup of a variable on the code's behalf."""


def entry(value: Any) -> Optional[Dict[str, Any]]:
    """One checked entry ``{kind, what, count, site?, via?, present?, by?}``, or None."""
    if not isinstance(value, dict) or value.get("kind") not in KINDS:
        return None
    what, count = value.get("what"), value.get("count")
    if not isinstance(what, str) or not isinstance(count, int) or isinstance(count, bool):
        return None
    kept: Dict[str, Any] = {"kind": value["kind"], "what": what[:MAX_TEXT], "count": max(count, 0)}
    for key in ("site", "via"):
        if isinstance(value.get(key), str):
            kept[key] = value[key][:MAX_TEXT]
    if isinstance(value.get("present"), bool):
        kept["present"] = value["present"]
    if value.get("by") in BY:
        kept["by"] = value["by"]
    return kept


def report(value: Any) -> Dict[str, Any]:
    """``{"entries": [entry, ...], "dropped": n}`` of a ``nondeterminism`` message or record.

    Malformed entries are left out and counted in ``dropped``; at most `MAX_ENTRIES` kept.
    """
    fields = value if isinstance(value, dict) else {}
    dropped = fields.get("dropped")
    total = dropped if isinstance(dropped, int) and not isinstance(dropped, bool) else 0
    kept: List[Dict[str, Any]] = []
    raw = fields.get("entries")
    for item in raw if isinstance(raw, list) else []:
        checked = entry(item)
        if checked is None or len(kept) >= MAX_ENTRIES:
            total += 1
        else:
            kept.append(checked)
    return {"entries": kept, "dropped": max(total, 0)}


def words(value: Dict[str, Any]) -> str:
    """One entry in words: ``randomness random.random (3 reads, via ..., tools.py:12)``.

    Hostile text stays text here; whoever prints it makes it inert.
    """
    count = value.get("count") or 0
    where = ["{} read{}".format(count, "s" if count != 1 else "")]
    if value.get("present") is False:
        where.append("unset in the sandbox")
    if value.get("by") == "package":
        where.append("by an installed package")
    elif value.get("by") == "stdlib":
        where.append("the standard library's own lookup")
    if value.get("via"):
        where.append("via {}".format(value["via"]))
    if value.get("site"):
        where.append(str(value["site"]))
    return "{} {} ({})".format(value.get("kind"), value.get("what"), ", ".join(where))


def refuses(value: Dict[str, Any]) -> bool:
    """True when an entry makes ``--strict-determinism`` refuse: all but a library's own reads.

    An installed package's reads (``by: package``: an SDK reading its own configuration
    variables, the platform's ``/etc/os-release``) and the standard library's own lookups
    (``by: stdlib``: urllib's proxies) are listed but do not refuse: they are the library's
    configuration, not the agent's behaviour (docs/reproduce.md says what this lets through).
    """
    return value.get("by") not in ("package", "stdlib")
