"""The host's outbound-destination log of one episode: distinct destinations with counts.

The runtime and its Python children report ``egress`` messages (`runner.runtime.egress.audit`): the
first attempt at a destination with all its fields, later ones as a ``count``, and attempts
past the sandbox's own cap as ``{"dropped": n}``. `OutboundLog` merges them by destination
(`runner.wire.destinations.destination_key`, the runtime's too: kind, host or else address,
port) over all processes.

Invariants: at most `MAX_OUTBOUND` distinct destinations are kept, the same
cap as each process of the sandbox has, so memory and the ``end`` line stay bounded; every
attempt is either counted in an entry or in `OutboundLog.dropped`; any drop makes the log's
coverage partial (`OutboundLog.partial`) with a reason naming the cap. A flood of decoy
lookups of a few names cannot push a later connect out of the log: repeats only count.

A name lookup is one destination however it was seen: the in-process hook's
``getaddrinfo`` entry names the port asked for, the egress witness's entry for the query it
read (`runner.runtime.egress.dns`) has none. A port-less ``dns`` entry of a name already
logged adds nothing; a port-less one logged first takes the hook's fields and count when they
arrive. So a name's count is the hook's (lookup calls) when the hook saw it, else the
witness's (queries: a resolver asks for A and AAAA, and asks again).
Everything in a message is hostile input: fields become JSON scalars, counts positive ints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.domain.words import counted
from runner.wire.destinations import MAX_DESTINATIONS, destination_key

__all__ = ["MAX_COUNT", "MAX_OUTBOUND", "OutboundLog"]

MAX_OUTBOUND = MAX_DESTINATIONS  # distinct destinations
MAX_COUNT = 1 << 53  # a count at or beyond this is forged: counted once
_ATTEMPT_KEYS = ("kind", "host", "address", "port", "resolved_from", "outcome", "pid", "event")


def _count(value: Any) -> int:
    """An attempt count from the sandbox: a positive int below `MAX_COUNT`, else 1."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < MAX_COUNT:
        return value
    return 1


def _scalar(value: Any) -> Any:
    """A field of an attempt as a JSON scalar (a list or object becomes bounded text)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)[:512]


@dataclass
class OutboundLog:
    """Distinct outbound destinations of one episode, with their attempt counts.

    Attributes:
        entries: one dict per destination, in first-seen order: the attempt's fields
            (``kind``, ``host``, ``address``, ``port``, ``resolved_from``, ``outcome``,
            ``pid``, ``event``, as sent) and ``count``, the attempts at it.
        dropped: attempts at destinations beyond the cap (here or in the sandbox).
    """

    entries: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    _index: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _names: dict[Any, int] = field(default_factory=dict)  # dns host -> its first entry

    def add(self, message: dict[str, Any]) -> None:
        """Take one ``egress`` message (``attempt`` + ``count``, or ``dropped``)."""
        attempt = message.get("attempt")
        if attempt is None and "dropped" in message:
            self.dropped = min(MAX_COUNT, self.dropped + _count(message.get("dropped")))
            return
        if not isinstance(attempt, dict):
            return
        count = _count(message.get("count", 1))
        clean = {k: _scalar(attempt.get(k)) for k in _ATTEMPT_KEYS if k in attempt}
        key = destination_key(clean)
        if key not in self._index and self._same_lookup(clean, key, count):
            return
        index = self._index.get(key)
        if index is not None:
            entry = self.entries[index]
            entry["count"] = min(MAX_COUNT, entry["count"] + count)
        elif len(self.entries) >= MAX_OUTBOUND:
            self.dropped = min(MAX_COUNT, self.dropped + count)
        else:
            clean["count"] = count
            self._index[key] = len(self.entries)
            if clean.get("kind") == "dns":
                self._names.setdefault(clean.get("host"), len(self.entries))
            self.entries.append(clean)

    def _same_lookup(self, clean: dict[str, Any], key: tuple[Any, ...], count: int) -> bool:
        """Merge a ``dns`` attempt into the entry of the same name; True when merged."""
        if clean.get("kind") != "dns" or clean.get("host") is None:
            return False
        index = self._names.get(clean["host"])
        if index is None:
            return False
        entry = self.entries[index]
        if clean.get("port") is None:  # the witness saw a lookup the log has: nothing new
            return True
        if entry.get("port") is not None:  # another port of a name: a destination of its own
            return False
        del self._index[destination_key(entry)]  # the hook names the port the witness could not
        entry.update(clean, count=count)  # lookups, not the witness's queries
        self._index[key] = index
        return True

    @property
    def partial(self) -> bool:
        """True when some attempt is in no entry (the cap was reached)."""
        return self.dropped > 0

    def coverage_reason(self) -> dict[str, Any] | None:
        """The ``coverage_detail`` entry saying what the cap dropped, or None."""
        if not self.dropped:
            return None
        return {
            "partial": True,
            "reason": f"outbound log capped at {MAX_OUTBOUND} distinct destinations (kind, host,"
            f" port): {counted(self.dropped, 'attempt')} at further destinations not logged",
        }
