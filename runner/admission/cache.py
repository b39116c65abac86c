"""Tool descriptions kept in the state folder: one describing sandbox per snapshot, not per command.

``submit`` and ``run`` describe their tool modules inside a sandbox
(`runner.admission.sandbox_registry`). What the sandbox answers depends only on
what it ran: the tool snapshot's content, the image, the policy (its limits), the runtime's own
files, the modules asked for and which snapshot folder is mounted where. So the answer is kept
under the sha256 of exactly that (`description_key`), and ``submit --resume`` or a second
command over the same snapshot reads it instead of starting a sandbox again.

- **file**: ``<state>/tool-descriptions/<key>.json`` = ``{"v": 1, "key", "answer",
  "tool_paths", "outbound"}``, written by the host (to a temporary file, then renamed), only
  for an answer without an import error;
- **read strictly** all the same (`DescriptionCache.get`): at most `MAX_FILE_BYTES`, UTF-8,
  strict JSON (no duplicate keys, no NaN), exactly these keys and types, the key it names equal
  to its file's. Anything else is logged and ignored (the sandbox describes again and the file
  is replaced); the answer inside stays untrusted data, checked field by field like a fresh one;
- **no key** when the backend cannot name the image's id: nothing is read or kept.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner import resources
from runner.admission.answer import clean_text
from runner.admission.describe_run import ATTEMPT_KEYS, MAX_OUTBOUND, SandboxAnswer
from runner.domain.ids import path_for_id
from runner.episode.driver import lookup_image_id
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.sdk import canonical_json
from runner.tools.snapshot.sources import run_roots
from runner.trace.strictjson import loads as strict_loads

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.domain.workflow import WorkflowFile
    from runner.policy.loader import Policy
    from runner.tools.snapshot.toolsnapshot import ToolSnapshot

__all__ = [
    "DESCRIPTIONS_DIR",
    "MAX_FILE_BYTES",
    "DescriptionCache",
    "DescriptionSlot",
    "description_key",
    "description_slot",
    "report_outbound",
]

log = get_logger(__name__)

DESCRIPTIONS_DIR = "tool-descriptions"
MAX_FILE_BYTES = 64 * 1024 * 1024
VERSION = 1
_KEYS = {"v", "key", "answer", "tool_paths", "outbound"}


@functools.cache
def runtime_digest() -> str:
    """sha256 hex over the ``runner`` package's Python files (what every sandbox runs)."""
    digest = hashlib.sha256()
    root = resources.package_dir()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def description_key(
    *,
    snapshot_digest: str,
    image_id: str,
    policy_hash: str,
    modules: list[str],
    folders: list[int],
) -> str:
    """sha256 hex naming one description.

    Args:
        snapshot_digest: the tool snapshot's digest.
        image_id: the image's id (``sha256:...``), not its tag.
        policy_hash: the policy's hash (its limits shape the sandbox).
        modules: the modules asked for, in order.
        folders: the snapshot folder mounted at ``/sandbox/tools/i``, for each ``i``.
    """
    return hashlib.sha256(
        canonical_json(
            {
                "v": VERSION,
                "snapshot": snapshot_digest,
                "image_id": image_id,
                "policy_hash": policy_hash,
                "runtime": runtime_digest(),
                "modules": modules,
                "folders": folders,
            }
        ).encode()
    ).hexdigest()


@dataclass(frozen=True)
class DescriptionCache:
    """The descriptions of one state folder.

    Args:
        state_dir: the state folder.
    """

    state_dir: Path

    @property
    def folder(self) -> Path:
        """``<state>/tool-descriptions``."""
        return self.state_dir.resolve() / DESCRIPTIONS_DIR

    def _path(self, key: str) -> Path:
        return path_for_id(self.folder, key, suffix=".json", kind="description key")

    def get(self, key: str) -> SandboxAnswer | None:
        """The description kept under ``key``, or None (absent, or unusable: logged)."""
        try:
            path = self._path(key)
        except InputError:
            return None
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("tool_description_unreadable", file=str(path), error=str(exc))
            return None
        try:
            return self._parse(data, key)
        except ValueError as exc:  # StrictJSONError and UnicodeDecodeError too
            log.warning("tool_description_ignored", file=str(path), reason=str(exc)[:200])
            return None

    @staticmethod
    def _parse(data: bytes, key: str) -> SandboxAnswer:
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
        text = data.decode("utf-8")
        record = strict_loads(text)  # StrictJSONError (a ValueError): duplicate keys, NaN, depth
        if not isinstance(record, dict) or set(record) != _KEYS:
            raise ValueError(
                "not a description record (its keys are not " + ", ".join(sorted(_KEYS)) + ")"
            )
        if record["v"] != VERSION or record["key"] != key:
            raise ValueError("another version or key than its file name says")
        answer, paths, outbound = record["answer"], record["tool_paths"], record["outbound"]
        if not isinstance(answer, dict) or answer.get("type") != "manifest" or "error" in answer:
            raise ValueError("'answer' is not a manifest message without an error")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ValueError("'tool_paths' is not a list of strings")
        if (
            not isinstance(outbound, list)
            or len(outbound) > MAX_OUTBOUND
            or not all(isinstance(a, dict) and set(a) <= set(ATTEMPT_KEYS) for a in outbound)
        ):
            raise ValueError("'outbound' is not a list of outbound attempts")
        return SandboxAnswer(answer, paths, outbound)

    def put(self, key: str, description: SandboxAnswer) -> None:
        """Keep ``description`` under ``key`` (atomically; a failure is logged, not raised)."""
        record = {
            "v": VERSION,
            "key": key,
            "answer": description.answer,
            "tool_paths": description.tool_paths,
            "outbound": description.outbound,
        }
        tmp: str | None = None
        try:
            path = self._path(key)
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".writing-", dir=self.folder)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle, ensure_ascii=True, allow_nan=False)
            os.replace(tmp, path)
            tmp = None
        except (OSError, InputError, TypeError, ValueError) as exc:
            log.warning("tool_description_not_kept", key=key, error=str(exc))
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


@dataclass(frozen=True)
class DescriptionSlot:
    """Where one description is kept: a cache and a key."""

    cache: DescriptionCache
    key: str

    def get(self) -> SandboxAnswer | None:
        """The kept description, or None."""
        return self.cache.get(self.key)

    def put(self, description: SandboxAnswer) -> None:
        """Keep ``description`` (only a checked answer without an import error)."""
        self.cache.put(self.key, description)


def description_slot(
    workflow: WorkflowFile,
    modules: list[str],
    roots: list[Path],
    *,
    backend: Backend,
    state_dir: Path,
    image: str,
    policy: Policy,
    snapshot: ToolSnapshot,
) -> DescriptionSlot | None:
    """The slot of the description these inputs would get, or None without an image id.

    Raises:
        InputError: a root the snapshot does not hold.
    """
    image_id = lookup_image_id(backend, image)
    if not image_id:
        return None
    mounts, _ = snapshot.mounts(run_roots(workflow, roots))
    key = description_key(
        snapshot_digest=snapshot.digest,
        image_id=image_id,
        policy_hash=str(getattr(policy, "hash", "")),
        modules=list(modules),
        folders=[int(mount.source.name) for mount in mounts],
    )
    return DescriptionSlot(DescriptionCache(state_dir), key)


def report_outbound(
    workflow: WorkflowFile, outbound: list[dict[str, Any]], *, cached: bool
) -> None:
    """Log what the modules tried to reach while the sandbox imported them (printed inert)."""
    if not outbound:
        return

    shown = [
        clean_text(
            f"{a.get('kind')} {a.get('host') or a.get('address')}:{a.get('port')}"
            f" ({a.get('outcome')})"
        )
        for a in outbound[:20]
    ]
    log.warning(
        "tool_import_outbound",
        workflow=str(workflow.path),
        attempts=len(outbound),
        destinations=shown,
        cached=cached,
    )
