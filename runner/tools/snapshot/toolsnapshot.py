"""The tool snapshot: the only user files a sandbox sees, copied once when a command starts.

A sandbox needs the workflow's tool code, and nothing else of the user's folders: a tool folder
is often the project folder, beside the tasks file (whose ``expected`` is the rubric's answer
key), traces, the state folder, ``.env`` and ``.git``. So no user folder is mounted live. Each
command that runs sandboxes (``run``, ``submit``, ``reproduce``, the sandbox that describes tool
modules) builds one `ToolSnapshot` at its start and every sandbox of the command mounts it:

- **contents**: the entries the workflow declares (`SnapshotEntry`: the top-level module file or
  package of each ``tools`` module, and what its ``files`` globs match), found by
  `runner.tools.snapshot.sources`;
- **minus**, at any depth of a declared package or folder: entries whose real path is an
  excluded file (the tasks file, traces the command reads; a hard link to one too) or the state
  folder or inside it; virtual environments (a folder holding ``pyvenv.cfg``, ``site-packages``,
  ``dist-packages``); dot entries; ``__pycache__``; JSON Lines or JSON files whose first line is
  a trace's ``run`` line or a task record (`looks_like_tasks_or_trace`);
- **links**: a symbolic link is followed only when its target lies inside the same source folder
  (the target's real path is then what the exclusions judge); one leading out of it is left out,
  with a warning (a declared module that is such a link is an error);
- **special files** (FIFO, device, socket) are refused with an `InputError` naming them; files
  are opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked again after opening;
- **bounds**: at most `MAX_FILES` files and `MAX_BYTES` bytes (an `InputError` says which);
- **layout**: ``<state>/snapshots/<digest>/<k>/...``, one folder ``k`` per source folder (the
  ``sys.path`` folder of a module, or the workflow's folder for its data files), files mode 0644
  and folders 0755 whatever the host's modes, so the sandbox user can read them (a root-owned
  0700 folder works); mounted read-only at ``/sandbox/tools/i`` (`ToolSnapshot.mounts`);
- **digest**: sha256 over every entry in sorted order of its relative path (UTF-8 bytes, as
  the OS gives them): ``d NUL path LF`` for a folder, ``f NUL path NUL sha256-hex(content) LF``
  for a file. Host paths, modes and times do not count: the same tool code gives the same digest
  on every machine. It is the trace's ``environment.tool_snapshot``;
- **reuse**: a snapshot whose digest exists already is checked (`verify`) and shared; ``submit``
  records digest and source folders in its job file, and ``--resume`` mounts that snapshot again
  (`ToolSnapshot.load`), whatever happened to the source files since.

Invariant: what a sandbox runs is what the source files held when the snapshot was read; the
sandbox never sees a path of the source folders themselves.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.backends.base import Mount
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.tools.snapshot.tree import (
    DIR_MODE,
    MAX_BYTES,
    MAX_FILES,
    SnapshotEntry,
    copy_file,
    looks_like_tasks_or_trace,
    plan_entries,
    tree_digest,
    verify,
)
from runner.wire import protocol

__all__ = [
    "MAX_BYTES",
    "MAX_FILES",
    "SNAPSHOTS_DIR",
    "SnapshotEntry",
    "ToolSnapshot",
    "build_snapshot",
    "looks_like_tasks_or_trace",
]

log = get_logger(__name__)

SNAPSHOTS_DIR = "snapshots"
BUILDING_PREFIX = ".building-"
STALE_BUILD_S = 3600.0  # a build folder this old was left by a killed command


def _remove_stale_builds(home: Path) -> None:
    """Remove build folders a killed command left behind (never one still being written)."""
    now = time.time()
    for folder in home.glob(BUILDING_PREFIX + "*"):
        try:
            if now - folder.stat().st_mtime > STALE_BUILD_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


@dataclass(frozen=True)
class ToolSnapshot:
    """A built snapshot: where it is, what it holds, and which source folder is which.

    Attributes:
        digest: sha256 hex of the content (the module docstring gives the rule).
        path: ``<state>/snapshots/<digest>``.
        roots: the source folders; ``roots[k]`` was copied to ``path / str(k)``.
        files: regular files in it.
        bytes: their total size.
        build_s: seconds the build (or the check of a reused one) took.
    """

    digest: str
    path: Path
    roots: tuple[Path, ...]
    files: int = 0
    bytes: int = 0
    build_s: float = 0.0

    def mounts(self, roots: Sequence[Path]) -> tuple[list[Mount], list[str]]:
        """Read-only mounts of ``roots``' copies, and their sandbox paths, in that order.

        Args:
            roots: host source folders a run needs (its tool roots, its workflow's folder).

        Returns:
            ``(mounts, tool_paths)``: ``roots[i]``'s copy is mounted at ``/sandbox/tools/i``.

        Raises:
            InputError: a folder this snapshot does not hold (the run's tool folders are not
                those the snapshot was built from, e.g. a resumed job run from elsewhere).
        """
        index = {root: k for k, root in enumerate(self.roots)}
        mounts: list[Mount] = []
        paths: list[str] = []
        for i, root in enumerate(dict.fromkeys(Path(r).resolve() for r in roots)):
            if root not in index:
                raise InputError(
                    f"tool folder {root} is not in the command's tool snapshot {self.digest[:12]} "
                    f"(it holds {', '.join(str(r) for r in self.roots) or 'no folder'})",
                    field="tools",
                )
            target = f"{protocol.TOOLS_DIR}/{i}"
            mounts.append(Mount(self.path / str(index[root]), target))
            paths.append(target)
        return mounts, paths

    def copy_of(self, root: Path) -> Path:
        """The folder holding the copy of source folder ``root``.

        Raises:
            InputError: a folder this snapshot does not hold.
        """
        (mount,), _ = self.mounts([root])
        return mount.source

    def to_json(self) -> dict[str, Any]:
        """``{"digest", "roots", "files", "bytes"}`` (what a job file records)."""
        return {
            "digest": self.digest,
            "roots": [str(r) for r in self.roots],
            "files": self.files,
            "bytes": self.bytes,
        }

    @classmethod
    def load(cls, state_dir: Path, data: Any, *, where: str = "job.json") -> ToolSnapshot:
        """The snapshot a job file recorded, checked against its digest.

        Raises:
            InputError: the record is malformed, or the snapshot is missing or its content no
                longer has its digest (``where`` named).
        """
        digest = data.get("digest") if isinstance(data, dict) else None
        roots = data.get("roots") if isinstance(data, dict) else None
        if (
            not isinstance(digest, str)
            or len(digest) != 64
            or any(c not in "0123456789abcdef" for c in digest)
            or not isinstance(roots, list)
            or not all(isinstance(r, str) for r in roots)
        ):
            raise InputError("not a tool snapshot record", file=where, field="tool_snapshot")
        started = time.monotonic()
        path = state_dir.resolve() / SNAPSHOTS_DIR / digest
        files, size = verify(path, digest, len(roots), where=where)
        return cls(
            digest, path, tuple(Path(r) for r in roots), files, size, time.monotonic() - started
        )


def build_snapshot(
    entries: Sequence[SnapshotEntry], *, state_dir: Path, exclude: Iterable[Path] = ()
) -> ToolSnapshot:
    """Copy ``entries`` into a content-addressed snapshot under ``state_dir``.

    Args:
        entries: what the workflows declare (`runner.tools.snapshot.sources`).
        state_dir: the state folder (never copied; the snapshot is written below it).
        exclude: files never copied, by real path (the tasks file, traces read).

    Returns:
        The snapshot (a new one, or an identical one built before and checked).

    Raises:
        InputError: a special file, a declared module leading outside its folder, or more
            than `MAX_FILES` files / `MAX_BYTES` bytes (the declaration named).
    """
    started = time.monotonic()
    state = state_dir.resolve()
    plan = plan_entries(entries, state, exclude)
    roots = tuple(dict.fromkeys(e.root for e in entries))
    home = state / SNAPSHOTS_DIR
    home.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(home)
    scratch = Path(tempfile.mkdtemp(prefix=BUILDING_PREFIX, dir=home))
    try:
        for folder in sorted(plan.dirs, key=lambda d: d.count("/")):
            (scratch / folder).mkdir(mode=DIR_MODE, exist_ok=True)
            (scratch / folder).chmod(DIR_MODE)
        hashes: dict[str, str] = {}
        size = 0
        for dest, source in sorted(plan.files.items()):
            hashes[dest], length = copy_file(source, scratch / dest)
            size += length
            if size > MAX_BYTES:
                raise InputError(f"the tool snapshot grew past {MAX_BYTES} bytes", file=str(source))
        digest = tree_digest(plan.dirs, hashes)
        final = home / digest
        scratch.chmod(DIR_MODE)
        try:
            os.rename(scratch, final)
        except OSError:  # built before (or by a command running at the same time): check it
            try:
                verify(final, digest, len(roots))
            except InputError:
                log.warning("snapshot_damaged_replaced", digest=digest)
                shutil.rmtree(final, ignore_errors=True)
                os.rename(scratch, final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    snapshot = ToolSnapshot(digest, final, roots, len(hashes), size, time.monotonic() - started)
    log.info(
        "tool_snapshot_built",
        digest=digest,
        files=snapshot.files,
        bytes=snapshot.bytes,
        ms=round(snapshot.build_s * 1000, 1),
    )
    return snapshot
