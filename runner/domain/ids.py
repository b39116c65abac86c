r"""Ids that become file or folder names: task ids, job ids, run ids (SPEC.md id rules).

Invariants:
- a valid id is a non-empty string of at most `MAX_ID_LENGTH` characters that is neither
  ``.`` nor ``..``, holds no path separator (``/``, ``\``), no character Windows forbids in file
  names (``<>:"|?*``), no control character, and does not start or end with a space or a dot;
- a valid id is not a Windows device name (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM0``-``COM9``,
  ``LPT0``-``LPT9``, also ``COM¹``-``³``/``LPT¹``-``³``), in any case and with any extension
  (``aux.txt``): Windows opens the device instead of the file;
- within one namespace (`IdSet`) two ids that differ only in case are a collision, because
  macOS and Windows file systems would map them to the same file;
- run ids come from an injected `IdFactory`, so tests get deterministic ids without patching;
- an untrusted name or relative path becomes a path only through `path_for_id` (one name) or
  `path_under` (``/``-separated parts, e.g. a packet member or a workflow's tool manifest):
  every part is a valid id, and the path, links resolved, stays inside the given root. Nothing
  read from a trace, a packet, a task file or an import names a path any other way.
"""

from __future__ import annotations

import itertools
import os
import secrets
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from runner.errors import InputError

MAX_ID_LENGTH = 128
MAX_RELATIVE_PATH_LENGTH = 1024
"""Characters of a relative path `path_under` accepts: far below every system's path limit."""

_FORBIDDEN = frozenset('/\\<>:"|?*')
_DEVICE_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [
        f"{port}{n}"
        for port in ("COM", "LPT")
        for n in [*"0123456789", "\u00b9", "\u00b2", "\u00b3"]
    ]
)

IdFactory = Callable[[], str]
"""Makes a fresh run id on each call (the result is validated by `validate_id`)."""


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid id, or None when it is.

    Args:
        value: the candidate id (anything; only a ``str`` can be valid).

    Returns:
        A short reason for an error message, or None.

    """
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long; at most {MAX_ID_LENGTH} are allowed"
    if value in (".", ".."):
        return f"{value!r} is not allowed (it names a folder)"
    bad = sorted({c for c in value if c in _FORBIDDEN})
    if bad:
        forbidden = "".join(sorted(_FORBIDDEN))
        return f"{value!r} contains {''.join(bad)!r}: none of {forbidden} is allowed"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in value):
        return f"{value!r} contains a control or unprintable character"
    if value != value.strip(" ") or value.endswith("."):
        return f"{value!r} starts or ends with a space or ends with a dot"
    if is_device_name(value):
        return (
            f"{value!r} names a Windows device (CON, PRN, AUX, NUL, COM1-9, LPT1-9, any extension)"
        )
    return None


def is_device_name(value: str) -> bool:
    """Whether Windows would open a device for the file name ``value``.

    True when the part before the first dot (spaces at its end ignored, as Windows does), in any
    case, is a reserved device name: ``aux``, ``Nul.txt``, ``COM1.tar.gz``.
    """
    return value.split(".", 1)[0].rstrip(" ").upper() in _DEVICE_NAMES


def validate_id(
    value: object,
    *,
    kind: str = "id",
    file: str | None = None,
    line: int | None = None,
    field: str | None = None,
) -> str:
    """Return ``value`` when it is a valid id.

    Args:
        value: the candidate id.
        kind: what the id names (``task id``, ``run id``), for the message.
        file: the file the id came from, for the message.
        line: its 1-based line.
        field: the field holding it.

    Raises:
        InputError: the id breaks a rule; the message names the rule, the file, line and field.

    """
    problem = id_problem(value)
    if problem is not None:
        raise InputError(f"invalid {kind}: {problem}", file=file, line=line, field=field)
    assert isinstance(value, str)
    return value


def collision_key(value: str) -> str:
    """Return the key two ids collide on: case-folded NFC ."""
    return unicodedata.normalize("NFC", value).casefold()


class IdSet:
    """A namespace of ids in which case-insensitive duplicates are rejected.

    Args:
        kind: what the ids name, for messages (``task id``).

    """

    def __init__(self, kind: str = "id") -> None:
        self.kind = kind
        self._seen: dict[str, tuple[str, str]] = {}

    def add(self, value: str, where: str = "") -> None:
        """Record ``value``, defined at ``where`` (e.g. ``tasks.jsonl:3``).

        Raises:
            InputError: ``value`` equals an earlier id, or differs from it only in case (the
                message names both and where the first was defined).

        """
        key = collision_key(value)
        previous = self._seen.get(key)
        if previous is not None:
            first, first_where = previous
            at = f" (first at {first_where})" if first_where else ""
            if first == value:
                raise InputError(f"duplicate {self.kind} {value!r}{at}")
            raise InputError(
                f"{self.kind} {value!r} collides with {first!r}{at}: ids differing only in case "
                "name the same file on macOS and Windows"
            )
        self._seen[key] = (value, where)

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and collision_key(value) in self._seen

    def __len__(self) -> int:
        return len(self._seen)


def sequential_ids(prefix: str = "run", start: int = 1) -> IdFactory:
    """Make a deterministic factory: ``run-0001``, ``run-0002``, ... (tests, reproducible runs).

    Raises:
        InputError: ``prefix`` is not itself a valid id.

    """
    validate_id(prefix, kind="id prefix")
    counter = itertools.count(start)
    return lambda: f"{prefix}-{next(counter):04d}"


def timestamped_ids(
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    entropy: Callable[[], str] = lambda: secrets.token_hex(3),
    prefix: str = "run",
) -> IdFactory:
    """Make the production factory: ``run-20261130T010203Z-a1b2c3`` (UTC time plus 6 hex digits).

    Both sources are injectable, so the factory is deterministic when they are.
    """
    return lambda: f"{prefix}-{now().astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}-{entropy()}"


def new_run_id(factory: IdFactory) -> str:
    """Draw a run id from ``factory`` and validate it.

    Raises:
        InputError: the factory produced an invalid id.

    """
    return validate_id(factory(), kind="run id")


def path_for_id(
    root: Path,
    value: object,
    *,
    suffix: str = "",
    kind: str = "id",
    file: str | None = None,
    line: int | None = None,
    field: str | None = None,
) -> Path:
    """``root / (value + suffix)`` for an untrusted name: the one way a name becomes a path.

    Args:
        root: the folder the path must stay in (it need not exist yet).
        value: the untrusted name (a run id, a task id, a recorded workflow name).
        suffix: appended after validation, e.g. ``.jsonl`` (trusted: the caller's constant).
        kind: what the name names, for the message (``run id``, ``workflow name``).
        file: the file the name came from, for the message.
        line: its 1-based line.
        field: the field holding it.

    Returns:
        The path, inside ``root`` also after resolving links.

    Raises:
        InputError: ``value`` breaks an id rule (`validate_id`), or a link inside ``root``
            would take the path outside it.
    """
    name = validate_id(value, kind=kind, file=file, line=line, field=field)
    return _contained(root, root / f"{name}{suffix}", name, kind, str(root), file, line, field)


def path_under(
    root: Path,
    relative: object,
    *,
    kind: str = "path",
    within: str = "the folder it must stay in",
    file: str | None = None,
    line: int | None = None,
    field: str | None = None,
) -> Path:
    r"""``root / relative`` for an untrusted relative path (parts separated by ``/``).

    ``.`` parts and empty parts (``./a//b``, a trailing ``/``) are dropped, as ``tar`` and
    POSIX do; every remaining part must be a valid id (`id_problem`: so no ``..``, no ``\``,
    no drive letter, no control character, no device name, at most `MAX_ID_LENGTH`
    characters), the whole at most `MAX_RELATIVE_PATH_LENGTH` characters.

    Args:
        root: the folder the path must stay in (it need not exist yet).
        relative: the untrusted path (a packet member, a ``tools`` entry).
        kind: what it names, for the message (``packet member``, ``tool manifest``).
        within: what ``root`` is, for the message (``the packet``).
        file: the file it came from, for the message.
        line: its 1-based line.
        field: the field holding it.

    Returns:
        The path (``root`` itself for ``.``), inside ``root`` also after resolving links.

    Raises:
        InputError: an absolute path, a part breaking an id rule, a path too long, an empty
            path, or one that a link inside ``root`` takes outside it.
    """

    def error(problem: str) -> InputError:
        return InputError(f"invalid {kind}: {problem}", file=file, line=line, field=field)

    if not isinstance(relative, str):
        raise error(f"must be a string, not {type(relative).__name__}")
    if not relative:
        raise error("must not be empty")
    shown = repr(relative if len(relative) <= 80 else relative[:80] + "...")
    if len(relative) > MAX_RELATIVE_PATH_LENGTH:
        raise error(
            f"{shown} is {len(relative)} characters long; at most "
            f"{MAX_RELATIVE_PATH_LENGTH} are allowed"
        )
    if PurePosixPath(relative).is_absolute():
        raise error(f"{shown} is an absolute path: it leaves {within}")
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if not parts:
        return root
    for part in parts:
        if part == "..":
            raise error(f"{shown} holds '..': it leaves {within}")
        problem = id_problem(part)
        if problem is not None:
            raise error(f"{shown}: a part of it {problem}")
    return _contained(root, root.joinpath(*parts), relative, kind, within, file, line, field)


def _contained(
    root: Path,
    path: Path,
    shown: str,
    kind: str,
    within: str,
    file: str | None,
    line: int | None,
    field: str | None,
) -> Path:
    """``path`` when it stays inside ``root`` with every link resolved, else an `InputError`."""
    base = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != base and base not in real.parents:
        shown = shown if len(shown) <= 80 else shown[:80] + "..."
        raise InputError(
            f"invalid {kind}: {shown!r} leaves {within} (a link in it leads to {real})",
            file=file,
            line=line,
            field=field,
        )
    return path
