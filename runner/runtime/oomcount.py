"""How many processes of this sandbox the kernel's OOM killer ended. Standard library only.

The engine's ``State.OOMKilled`` is not enough to tell an OOM kill of a *child*: Docker sets it
from containerd's OOM event, which can arrive after the exit event the host inspects (seen
here: a child killed at its 96 MiB limit, the run read ``succeeded``, under load, about 1 run in
a few hundred). The kernel's own counter is read instead, from inside: the sandbox's memory
cgroup, which the engine mounts at ``/sys/fs/cgroup`` (read-only, the container's own group):

- cgroup v1: ``memory/memory.oom_control`` has a line ``oom_kill N`` (Linux 4.13+,
  ``mm/memcontrol.c`` ``mem_cgroup_oom_control_read``);
- cgroup v2: ``memory.events`` has ``oom_kill N`` (Documentation/admin-guide/cgroup-v2.rst).

The runtime reads the counter when the run starts and when it ends and sends the difference
as the episode's ``oom_kills`` (`runner.wire.protocol`); the host ORs it with the engine's flag
(`runner.episode.status.with_runtime_oom`). Where no counter is readable (a namespace sandbox
without cgroupfs, an old kernel) the reading is None and nothing is claimed.
"""

from typing import Optional

COUNTER_FILES = (
    "/sys/fs/cgroup/memory/memory.oom_control",  # cgroup v1
    "/sys/fs/cgroup/memory.events",  # cgroup v2
)
MAX_READ_BYTES = 4096  # both files are a handful of short lines


def oom_kill_count(files: "tuple[str, ...]" = COUNTER_FILES) -> Optional[int]:
    """The ``oom_kill`` counter of this process's memory cgroup, or None when unreadable.

    Args:
        files: where to look, first readable one wins (tests pass their own).

    Returns:
        The number of processes the OOM killer ended in the group since it was made; None when
        no file is readable or none has an ``oom_kill`` line. Never raises.
    """
    for path in files:
        try:
            with open(path, "rb") as handle:
                text = handle.read(MAX_READ_BYTES).decode("ascii", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value.strip())
    return None


class OomCounter:
    """The counter read at the run's start; `since_start` is the kills after it (None: unknown)."""

    def __init__(self, files: "tuple[str, ...]" = COUNTER_FILES) -> None:
        self.files = files
        self.start = oom_kill_count(files)

    def since_start(self) -> Optional[int]:
        """Kills counted since this object was made; None when either reading failed."""
        now = oom_kill_count(self.files)
        if now is None or self.start is None:
            return None
        return max(now - self.start, 0)
