"""What of a tool root the sandbox must not see: the state folder and the root's dot entries.

A tool root is mounted whole (its modules must import), and it is often the project folder:
the state folder (ledger, other runs' traces) and files such as ``.env`` (API keys), ``.git``
or ``.aws`` usually sit beside the tool code. `hidden_mounts` returns read-only mounts that
cover them inside the sandbox: an empty folder over a folder, an empty file over a file. Python
modules and packages never start with a dot, so hiding every top-level dot entry costs no
import.

Invariants: each target is mounted over at most once; symbolic links are left alone (a mount
over one would land on its target, or fail on the read-only root when it dangles; inside the
sandbox one points at the sandbox's own files, or at nothing). Dot entries deeper than the
top level of a root stay visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import structlog

from runner.backends.base import Mount

log = structlog.get_logger(__name__)

EMPTY_DIR = "empty"
EMPTY_FILE = "empty-file"


def hidden_mounts(
    state_dir: Path, run_dir: Path, roots: Sequence[Path], tool_paths: Sequence[str]
) -> list[Mount]:
    """Read-only empty mounts over the state folder and the top-level dot entries of each root.

    Args:
        state_dir: the resolved state folder.
        run_dir: this run's folder; the empty folder and file are created in it.
        roots: resolved host tool roots, in mount order.
        tool_paths: the sandbox path each root is mounted at (same order).

    Returns:
        Mounts to add after the roots' own (targets under ``tool_paths``).
    """
    covers: dict[str, Mount] = {}
    for root, path in zip(roots, tool_paths, strict=True):
        if state_dir != root and state_dir.is_relative_to(root):
            target = f"{path}/{state_dir.relative_to(root).as_posix()}"
            covers[target] = Mount(_empty_dir(run_dir), target)
        for entry in _dot_entries(root):
            target = f"{path}/{entry.name}"
            if target not in covers:
                source = _empty_dir(run_dir) if entry.is_dir() else _empty_file(run_dir)
                covers[target] = Mount(source, target)
    return list(covers.values())


def _dot_entries(root: Path) -> list[Path]:
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:  # the sandbox is never more privileged than this process
        log.warning("tool_root_unlisted", root=str(root), error=str(exc))
        return []
    return [e for e in entries if e.name.startswith(".") and not e.is_symlink()]


def _empty_dir(run_dir: Path) -> Path:
    empty = run_dir / EMPTY_DIR
    empty.mkdir(mode=0o755, exist_ok=True)
    return empty


def _empty_file(run_dir: Path) -> Path:
    empty = run_dir / EMPTY_FILE
    if not empty.exists():
        empty.touch(mode=0o444)
    return empty
