"""The zygotes of one namespace backend: one per key, started on first use, replaced when gone.

A key (`ZygoteKey`) is what a zygote fixes when it starts: the image's tree, the mounts (the
runtime's packages, hence the runtime's version, and the command's tool snapshot), the user,
the working folder and, for the runtime, the environment its interpreter started with. Only
the limits, the lifetime cap and the run itself vary between sandboxes of one key; a ``submit``
job has one key (its tool-description sandbox shares it). A zygote lives until the backend
closes (the end of the job) or, idle, until more than `MOST_IDLE` keys are alive; a zygote
with running sandboxes is never closed early.

A spawn that finds its zygote gone, or that the zygote never answered (`ZygoteGone`: nothing
of that run was started), is asked once more of a fresh zygote; a second failure is the
sandbox's `InfrastructureError`. Sandboxes running in a zygote that ends end with it (it is the
init of their PID namespaces' parent) and are reported as infrastructure failures
(`runner.backends.namespace.zygote.ZygoteChild.lost`): each was charged for what it ran, once,
and is not re-run silently (``submit --resume`` runs it again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from runner.backends.base import Mount
from runner.backends.namespace.zygote import SpawnRequest, Zygote, ZygoteChild, ZygoteGone
from runner.errors import InfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = ["ATTEMPTS", "MOST_IDLE", "ZygoteKey", "Zygotes"]

ATTEMPTS = 2  # a spawn's zygote, then one fresh one
MOST_IDLE = 4  # zygotes kept alive beyond the busy ones (distinct keys of one process)


@dataclass(frozen=True)
class ZygoteKey:
    """What a zygote fixes at its start (module docstring).

    Attributes:
        tree: the image's root filesystem folder (by image id).
        mounts: the sandbox's mounts.
        user: ``uid:gid``.
        workdir: the working folder inside.
        env: the environment its interpreter starts with (sorted pairs).
    """

    tree: str
    mounts: tuple[Mount, ...]
    user: str
    workdir: str
    env: tuple[tuple[str, str], ...]


class Zygotes:
    """The keyed zygotes.

    Args:
        make: ``key -> Zygote`` (not started; `spawn` starts it).
    """

    def __init__(self, make: Callable[[ZygoteKey], Zygote]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._alive: OrderedDict[ZygoteKey, Zygote] = OrderedDict()
        self._starting: dict[ZygoteKey, threading.Lock] = {}
        self._closed = False
        self.started = 0  # zygotes started (a replacement counts)

    def _zygote(self, key: ZygoteKey) -> Zygote:
        with self._lock:
            if self._closed:
                raise InfrastructureError("the namespace backend is closed")
            starting = self._starting.setdefault(key, threading.Lock())
        with starting:  # one start per key at a time; others of the key wait for it
            with self._lock:
                found = self._alive.get(key)
                if found is not None and found.alive:
                    self._alive.move_to_end(key)
                    return found
                self._alive.pop(key, None)
            if found is not None:
                found.close()  # gone already: collect its process
            zygote = self._make(key)
            zygote.start()
            with self._lock:
                self.started += 1
                self._alive[key] = zygote
                idle = [k for k, z in self._alive.items() if k != key and not z.busy]
                surplus = [self._alive.pop(k) for k in idle[: max(0, len(idle) - MOST_IDLE)]]
            for each in surplus:
                each.close()
            return zygote

    def spawn(self, key: ZygoteKey, request: Callable[[], SpawnRequest]) -> ZygoteChild:
        """One sandbox of ``key`` from its zygote (started or replaced as needed).

        Args:
            key: the zygote's key.
            request: makes the spawn request (called once per attempt: its descriptors are
                consumed by each).

        Raises:
            InfrastructureError: no zygote could be started, or two in a row ended before
                answering.
        """
        failure: ZygoteGone | None = None
        for _ in range(ATTEMPTS):
            zygote = self._zygote(key)
            try:
                return zygote.spawn(request())
            except ZygoteGone as exc:
                failure = exc
                log.warning("zygote_spawn_lost", zygote=zygote.name, reason=str(exc))
        raise InfrastructureError(f"no namespace zygote could start the sandbox: {failure}")

    def pids(self) -> dict[ZygoteKey, int | None]:
        """The host pid of each live zygote's process (for tests and ``doctor``)."""
        with self._lock:
            return {k: z.pid for k, z in self._alive.items() if z.alive}

    def close(self) -> None:
        """Close every zygote (and so every sandbox they still run)."""
        with self._lock:
            self._closed = True
            zygotes = list(self._alive.values())
            self._alive.clear()
        for zygote in zygotes:
            zygote.close()
