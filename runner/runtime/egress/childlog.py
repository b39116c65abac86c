"""Forward what Python children of the sandbox logged to the channel.

Standard library only, Python 3.9+. Children are not connected to the channel: their audit hook
(`runner.runtime.egress.audit`) appends one JSON line per record, with one ``O_APPEND`` write, to a
file under ``$TMPDIR`` whose name carries a random nonce. The runtime creates the file, reads
what was appended at the end of each call and at exit, and forwards it.

Robustness: only complete lines are read (a line still being written waits for the next read);
a line that is not a valid record is counted, not forwarded; each forwarded record is rebuilt
from known fields with bounded strings; after `MAX_RECORDS` records one ``coverage`` message
says the log was capped (never a silent truncation).
"""

import contextlib
import json
import os
from typing import Any, Dict, List, Optional, Tuple

MAX_RECORDS = 10000
_READ_CHUNK = 1 << 20
_MAX_LINE = 64 * 1024
_EGRESS_KEYS = (
    "kind",
    "host",
    "address",
    "port",
    "resolved_from",
    "outcome",
    "pid",
    "event",
    "transport",
    "family",
    "url",
    "method",
)
_COVERAGE_KEYS = ("reason", "program", "argv", "library", "symbol", "pid", "clock")


def _count(value: Any) -> int:
    """A record's attempt count: a positive int, else 1 (a forged value counts once)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 53:
        return value
    return 1


def _field(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)[:1024]


def _temp_dir() -> str:
    """``$TMPDIR`` when it is a writable folder, else ``tempfile.gettempdir()``.

    ``tempfile`` is imported only in the second case: it costs a few ms of every run's start
    (``shutil``, ``random``, compression modules) and the sandbox always sets ``TMPDIR``.
    """
    candidate = os.environ.get("TMPDIR")
    if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
        return os.path.abspath(candidate)
    import tempfile

    return tempfile.gettempdir()


class ChildLog:
    """The append-only file Python children report to.

    Args:
        directory: where to create it (``$TMPDIR``; the sandbox's writable ``/tmp``).
    """

    def __init__(self, directory: Optional[str] = None) -> None:
        directory = directory or _temp_dir()
        nonce = os.urandom(8).hex()
        self.path = os.path.join(directory, ".sandbox-replay-egress-{}.jsonl".format(nonce))
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        self._offset = 0
        found = os.stat(self.path)
        self._mtime_ns = found.st_mtime_ns
        # (inode, size, mtime) when everything was read: an unchanged file is not opened again
        # (the runtime's pump looks five times a second, also while a run waits for its model)
        self._seen: Optional[Tuple[int, int, int]] = (found.st_ino, 0, found.st_mtime_ns)
        self._partial = b""
        self.forwarded = 0
        self.malformed = 0
        self._capped = False

    def read_new(self) -> List[Dict[str, Any]]:
        """Messages (dicts with a ``type``) appended since the last read, validated."""
        truncated: List[Dict[str, Any]] = []
        try:
            now = os.stat(self.path)
            if (now.st_ino, now.st_size, now.st_mtime_ns) == self._seen:
                return []  # nothing appended, cut or replaced since everything was read
            with open(self.path, "rb") as handle:
                found = os.fstat(handle.fileno())
                # cut by code in the sandbox: shorter than what was read, or written to since
                # the last read without growing (a child's record, then the truncation)
                if found.st_size < self._offset or (
                    found.st_size == self._offset and found.st_mtime_ns != self._mtime_ns
                ):
                    self._offset, self._partial = 0, b""
                    truncated.append(
                        {
                            "type": "coverage",
                            "partial": True,
                            "reason": "child egress log truncated by code in the sandbox",
                        }
                    )
                handle.seek(self._offset)
                data = handle.read(_READ_CHUNK * 16)
                after = os.fstat(handle.fileno())
                self._seen = None
                if after.st_size == self._offset + len(data):  # all read: remember its mtime
                    self._mtime_ns = after.st_mtime_ns
                    self._seen = (after.st_ino, after.st_size, after.st_mtime_ns)
        except OSError as exc:  # deleted or replaced by tool code: say so, once
            if not self._capped:
                self._capped = True
                return [
                    {
                        "type": "coverage",
                        "partial": True,
                        "reason": "child egress log unreadable: {}".format(exc),
                    }
                ]
            return []
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > _MAX_LINE:
            self.malformed += 1
            self._partial = b""
        out: List[Dict[str, Any]] = truncated
        for line in lines:
            message = self._parse(line)
            if message is None:
                continue
            if self.forwarded >= MAX_RECORDS:
                if not self._capped:
                    self._capped = True
                    out.append(
                        {
                            "type": "coverage",
                            "partial": True,
                            "reason": "child egress log capped at {} records".format(MAX_RECORDS),
                        }
                    )
                continue
            self.forwarded += 1
            out.append(message)
        return out

    def _parse(self, line: bytes) -> Optional[Dict[str, Any]]:
        if not line.strip():
            return None
        try:
            raw = json.loads(line.decode("utf-8"))
        except ValueError:
            self.malformed += 1
            return None
        if not isinstance(raw, dict):
            self.malformed += 1
            return None
        if raw.get("type") == "egress" and isinstance(raw.get("attempt"), dict):
            attempt = raw["attempt"]
            return {
                "type": "egress",
                "attempt": {k: _field(attempt.get(k)) for k in _EGRESS_KEYS if k in attempt},
                "count": _count(raw.get("count", 1)),
                "child": True,
            }
        if raw.get("type") == "egress" and "attempt" not in raw:  # attempts past the cap
            return {"type": "egress", "dropped": _count(raw.get("dropped")), "child": True}
        if raw.get("type") == "coverage":
            # ``partial: false`` is a clock-only note (under the witness); anything else partial
            message = {"type": "coverage", "partial": raw.get("partial") is not False}
            message["child"] = True
            message.update({k: _field(raw.get(k)) for k in _COVERAGE_KEYS if k in raw})
            return message
        self.malformed += 1
        return None

    def remove(self) -> None:
        """Delete the file (best effort)."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
