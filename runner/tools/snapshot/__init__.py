"""The tool snapshot: the only user files a sandbox sees, copied once when a command starts.

``toolsnapshot`` holds `ToolSnapshot` (a read-only copy of the declared tool code and data
files under ``<state>/snapshots/<digest>/``, its digest checked when it is mounted again) and
`build_snapshot`; ``sources`` decides what of a workflow goes in (`project_snapshot` for the
user's own project, `snapshot_for` for located modules, `tool_mounts` for a run's spec);
``tree`` does the file work (what to copy, the copy, the digest and its check, the caps).

May import: `runner.backends` (``Mount``), `runner.domain`, `runner.tools`,
`runner.wire.protocol`, `runner.errors`; nothing of `runner.episode`.
"""

from runner.tools.snapshot.sources import project_snapshot, snapshot_for, tool_mounts
from runner.tools.snapshot.toolsnapshot import SnapshotEntry, ToolSnapshot, build_snapshot

__all__ = [
    "SnapshotEntry",
    "ToolSnapshot",
    "build_snapshot",
    "project_snapshot",
    "snapshot_for",
    "tool_mounts",
]
