"""The file work behind the tool snapshot (`runner.tools.snapshot`).

What to copy, the copy, the digest and its check.

`plan_entries` walks the declared entries and decides, before anything is written, what is
copied where (exclusions, links, special files and bounds: the rules are in the snapshot's
module docstring); `copy_file` copies one file without following links or blocking and hashes
what it copied; `tree_digest` is the digest rule; `verify` checks a built snapshot against its
digest and resets its modes.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.hostlog import get_logger

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "MAX_BYTES",
    "MAX_FILES",
    "Plan",
    "SnapshotEntry",
    "copy_file",
    "looks_like_tasks_or_trace",
    "plan_entries",
    "tree_digest",
    "verify",
]

log = get_logger(__name__)

MAX_FILES = 10_000
MAX_BYTES = 256 * 1024 * 1024
FILE_MODE = 0o644
DIR_MODE = 0o755
VENV_NAMES = frozenset({"site-packages", "dist-packages"})
SNIFF_BYTES = 1 << 20  # how much of a .jsonl file's first line is read to recognise it
_CHUNK = 1 << 20
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


@dataclass(frozen=True)
class SnapshotEntry:
    """One declared thing to copy: a file or folder below a source folder.

    Attributes:
        root: the source folder, resolved (a module's ``sys.path`` folder, or the workflow's).
        relative: the entry's path below ``root``, ``/``-separated (a module file, a package
            folder, a data file or folder).
        where: ``file``/``line``/``field`` of the declaration, for errors.
        required: True for a declared module: leaving its folder is an error, not a skip.
    """

    root: Path
    relative: str
    where: Mapping[str, Any] = field(default_factory=dict)
    required: bool = False


def looks_like_tasks_or_trace(path: Path) -> bool:
    """True for a ``.jsonl``/``.json`` file whose first line is a trace's ``run`` line or a task.

    A task record (``task_id`` and ``input``) may carry the rubric's ``expected``; a trace
    records a run's answers. Neither belongs in a tool snapshot, whatever its name. Reads at
    most `SNIFF_BYTES` (opened like a copy: no link followed, never blocking); an unreadable or
    undecodable first line is not recognised.
    """
    if not path.name.endswith((".jsonl", ".json")):
        return False
    try:
        with os.fdopen(os.open(path, _OPEN_FLAGS), "rb") as handle:
            head = handle.read(SNIFF_BYTES).split(b"\n", 1)[0]
        record = json.loads(head.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(record, dict):
        return False
    return (record.get("type") == "run" and "v" in record) or (
        "task_id" in record and "input" in record
    )


class Plan:
    """What to copy, collected before anything is written (bounds checked as it grows)."""

    def __init__(self, state_dir: Path, exclude: Iterable[Path]) -> None:
        self.state_dir = state_dir
        self.exclude = {Path(os.path.realpath(p)) for p in exclude}
        self.identities: set[tuple[int, int]] = set()  # a hard link is the same file too
        for path in self.exclude:
            try:
                info = os.stat(path)
            except OSError:
                continue
            self.identities.add((info.st_dev, info.st_ino))
        self.files: dict[str, Path] = {}
        self.dirs: set[str] = set()
        self.size = 0

    def excluded(self, real: Path, info: os.stat_result) -> bool:
        """True when ``real`` (with ``info``) is an excluded file or in the state folder."""
        return (
            real in self.exclude
            or (info.st_dev, info.st_ino) in self.identities
            or real.is_relative_to(self.state_dir)
        )

    def add_file(self, dest: str, real: Path, size: int, where: Mapping[str, Any]) -> None:
        """Copy ``real`` to ``dest`` (its folders too).

        Raises:
            InputError: past `MAX_FILES` files or `MAX_BYTES` bytes (``where`` named).
        """
        if dest in self.files:
            return
        if len(self.files) >= MAX_FILES:
            raise InputError(
                f"the tool snapshot would hold more than {MAX_FILES} files (the limit): declare "
                "fewer files (the workflow's tools and files)",
                **where,
            )
        self.size += size
        if self.size > MAX_BYTES:
            raise InputError(
                f"the tool snapshot would hold more than {MAX_BYTES // (1024 * 1024)} MiB (the "
                f"limit; {real} alone is {size} bytes): declare fewer files",
                **where,
            )
        self.files[dest] = real
        parts = dest.split("/")
        for depth in range(1, len(parts)):
            self.dirs.add("/".join(parts[:depth]))


def _skipped_name(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def _special(mode: int) -> str | None:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return None


def _visit(
    plan: Plan,
    path: Path,
    real: Path,
    dest: str,
    root: Path,
    where: Mapping[str, Any],
    ancestors: frozenset[Path],
) -> None:
    """Add ``path`` (real path ``real``, copied to ``dest``) and, for a folder, its contents."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        log.warning("snapshot_entry_unreadable", path=str(path), error=str(exc))
        return
    if stat.S_ISLNK(info.st_mode):
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(root):
            log.warning("snapshot_link_outside_left_out", path=str(path), target=str(real))
            return
        try:
            info = os.stat(real)
        except OSError:
            log.warning("snapshot_dangling_link_left_out", path=str(path))
            return
    if plan.excluded(real, info):
        log.info("snapshot_excluded", path=str(path))
        return
    kind = _special(info.st_mode)
    if kind is not None:
        raise InputError(
            f"{path} is {kind}: a tool snapshot copies regular files and folders only",
            file=str(path),
        )
    if stat.S_ISDIR(info.st_mode):
        if real in ancestors:  # a link back up: a loop
            log.warning("snapshot_link_loop_left_out", path=str(path))
            return
        if path.name in VENV_NAMES or os.path.lexists(path / "pyvenv.cfg"):
            log.info("snapshot_venv_excluded", path=str(path))
            return
        plan.dirs.add(dest)
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            raise InputError(f"cannot list {path}: {exc}", file=str(path)) from exc
        inner = ancestors | {real}
        for name in names:
            if not _skipped_name(name):
                _visit(plan, path / name, real / name, f"{dest}/{name}", root, where, inner)
    elif stat.S_ISREG(info.st_mode):
        if looks_like_tasks_or_trace(real):
            log.info("snapshot_tasks_or_trace_excluded", path=str(path))
            return
        plan.add_file(dest, real, info.st_size, where)


def plan_entries(
    entries: Sequence[SnapshotEntry], state_dir: Path, exclude: Iterable[Path]
) -> Plan:
    """What ``entries`` copy where, decided before anything is written.

    Args:
        entries: the declared entries; source folder ``k`` (first appearance) is ``k/``.
        state_dir: the resolved state folder (never copied).
        exclude: files never copied (by real path, or the same file under another name).

    Raises:
        InputError: a special file, a declared module leaving its folder, or a bound passed.
    """
    plan = Plan(state_dir, exclude)
    roots = list(dict.fromkeys(e.root for e in entries))
    for k in range(len(roots)):
        plan.dirs.add(str(k))
    for entry in entries:
        k = roots.index(entry.root)
        parts = [p for p in entry.relative.split("/") if p not in ("", ".")]
        if not parts or ".." in parts or any(_skipped_name(p) for p in parts):
            if entry.required:
                raise InputError(f"{entry.relative!r} cannot be copied", **entry.where)
            continue  # dot entries and __pycache__ are never copied
        path = entry.root.joinpath(*parts)
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(entry.root):
            if entry.required:
                raise InputError(
                    f"{path} leads outside its folder {entry.root} (a symbolic link): the tool "
                    "snapshot copies nothing from outside the folder a module was found in",
                    **entry.where,
                )
            log.warning("snapshot_link_outside_left_out", path=str(path), target=str(real))
            continue
        dest = "/".join([str(k), *parts])
        parents = frozenset(Path(os.path.realpath(p)) for p in path.parents if p != path)
        _visit(plan, path, real, dest, entry.root, entry.where, parents)
    return plan


def copy_file(source: Path, target: Path) -> tuple[str, int]:
    """Copy one file (opened without following links, checked regular); its sha256 and size."""
    try:
        fd = os.open(source, _OPEN_FLAGS)
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror}", file=str(source)) from exc
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as reader:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # replaced by something else since it was looked at
            kind = _special(mode)
            raise InputError(
                f"{source} is {kind or 'not a regular file'}: a tool snapshot copies regular "
                "files only",
                file=str(source),
            )
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0))
        with os.fdopen(out, "wb") as writer:
            while chunk := reader.read(_CHUNK):
                size += len(chunk)
                if size > MAX_BYTES:
                    raise InputError(f"{source} grew past {MAX_BYTES} bytes", file=str(source))
                digest.update(chunk)
                writer.write(chunk)
    os.chmod(target, FILE_MODE)
    return digest.hexdigest(), size


def tree_digest(dirs: Iterable[str], files: Mapping[str, str]) -> str:
    """The snapshot digest of folders and ``{path: content sha256 hex}`` (docstring rule)."""
    lines = [(os.fsencode(d), b"d\0" + os.fsencode(d) + b"\n") for d in dirs]
    lines += [
        (os.fsencode(f), b"f\0" + os.fsencode(f) + b"\0" + h.encode("ascii") + b"\n")
        for f, h in files.items()
    ]
    total = hashlib.sha256()
    for _, line in sorted(lines):
        total.update(line)
    return total.hexdigest()


def verify(path: Path, digest: str, roots: int, *, where: str = "") -> tuple[int, int]:
    """Check that the snapshot folder ``path`` holds content of ``digest``; reset its modes.

    Args:
        path: ``<state>/snapshots/<digest>``.
        digest: the digest it must have.
        roots: how many source folders it must hold (``0`` ... ``roots - 1``).
        where: the file naming it (a job file), for the error.

    Returns:
        ``(files, bytes)`` of the snapshot.

    Raises:
        InputError: missing, holding a link or special file, or content of another digest.
    """
    try:
        dirs, files, size = _scan(path)
    except ValueError as exc:
        problem = str(exc)
    else:
        problem = ""
        if any(str(k) not in dirs for k in range(roots)):
            problem = "a source folder's copy is missing"
        elif tree_digest(dirs, files) != digest:
            problem = "its content no longer has its digest"
    if problem:
        raise InputError(
            f"the tool snapshot {digest[:12]} in {path.parent} is damaged: {problem}",
            file=where or None,
            field="tool_snapshot",
        )
    return len(files), size


def _scan(path: Path) -> tuple[list[str], dict[str, str], int]:
    """Folders, ``{file: sha256}`` and bytes of a built snapshot; modes reset to 0755/0644.

    Raises:
        ValueError: it is missing or holds a link or a special file.
    """
    if path.is_symlink() or not path.is_dir():
        raise ValueError("it is missing")
    dirs: list[str] = []
    files: dict[str, str] = {}
    size = 0
    path.chmod(DIR_MODE)
    for folder, subdirs, names in os.walk(path):
        here = Path(folder)
        base = here.relative_to(path).as_posix()
        for name in [*subdirs, *names]:
            relative = name if base == "." else f"{base}/{name}"
            mode = os.lstat(here / name).st_mode
            if stat.S_ISDIR(mode):
                dirs.append(relative)
                (here / name).chmod(DIR_MODE)
            elif stat.S_ISREG(mode):
                files[relative], length = _hash_file(here / name)
                size += length
                (here / name).chmod(FILE_MODE)
            else:
                raise ValueError(f"{relative} is not a regular file or folder")
    return dirs, files, size


def _hash_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size
