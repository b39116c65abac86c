"""The relay: one asyncio actor on the driver's node that carries every sandbox's stdio.

An episode's host side (`runner.episode.driver`: the channel, the provider, the ledger) stays
in the driver process; only the container runs on a worker node. A Ray task cannot be sent
anything once it runs, so each running sandbox has a mailbox here, keyed by its attempt key:
the node task puts the container's output frames in and takes the driver's commands out
(``write``, ``kill``, ``wait``, ``close``); the driver does the opposite. Both sides long-poll
(``timeout_s``), so nothing spins. The relay sees bytes only: never a key, never a ledger.

Invariants: frames come out in the order they were put (each side awaits each call, and the
actor appends before it yields); a closed or unknown mailbox answers a node with ``close``, so a
node task whose driver went away ends its sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

Frame = tuple[int, bytes]
Command = tuple[Any, ...]


@dataclass
class _Mailbox:
    output: list[Frame] = field(default_factory=list)
    eof: bool = False
    commands: list[Command] = field(default_factory=list)
    started: dict[str, Any] | None = None
    output_ready: asyncio.Event = field(default_factory=asyncio.Event)
    commands_ready: asyncio.Event = field(default_factory=asyncio.Event)
    start_ready: asyncio.Event = field(default_factory=asyncio.Event)


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=max(0.0, timeout_s))


class Relay:
    """Mailboxes of the running sandboxes (made a Ray actor by `runner.backends.ray.backend`)."""

    def __init__(self) -> None:
        self._boxes: dict[str, _Mailbox] = {}

    async def open(self, key: str) -> None:
        """Create the mailbox of sandbox attempt ``key`` (before its node task is submitted)."""
        self._boxes.setdefault(key, _Mailbox())

    async def close(self, key: str) -> None:
        """Drop ``key``'s mailbox; a node still polling it is told ``close``."""
        self._boxes.pop(key, None)

    async def started(self, key: str, info: dict[str, Any]) -> None:
        """Node side: the container runs (``info``: ``node``), or could not (``error``)."""
        box = self._boxes.get(key)
        if box is not None:
            box.started = info
            box.start_ready.set()

    async def wait_started(self, key: str, timeout_s: float) -> dict[str, Any] | None:
        """Driver side: the node's `started` info, or None when none came within ``timeout_s``."""
        box = self._boxes.get(key)
        if box is None:
            return None
        if box.started is None:
            await _wait(box.start_ready, timeout_s)
        return box.started

    async def put_output(self, key: str, frames: list[Frame], eof: bool) -> bool:
        """Node side: output frames, in order; ``eof`` when the output ended.

        Returns:
            False when the mailbox is gone (the driver closed it: stop sending).
        """
        box = self._boxes.get(key)
        if box is None:
            return False
        box.output.extend(frames)
        box.eof = box.eof or eof
        box.output_ready.set()
        return True

    async def read_output(self, key: str, timeout_s: float) -> tuple[list[Frame], bool]:
        """Driver side: the frames put since the last read (waiting up to ``timeout_s``).

        Returns:
            ``(frames, eof)``; ``eof`` True once the node said the output ended and every frame
            before it was read (an unknown mailbox reads as ended).
        """
        box = self._boxes.get(key)
        if box is None:
            return [], True
        if not box.output and not box.eof:
            await _wait(box.output_ready, timeout_s)
        frames, box.output = box.output, []
        box.output_ready.clear()
        return frames, box.eof

    async def command(self, key: str, command: Command) -> bool:
        """Driver side: queue a command for the node (``("write", data, timeout_s)``, ...).

        Returns:
            False when the mailbox is gone.
        """
        box = self._boxes.get(key)
        if box is None:
            return False
        box.commands.append(command)
        box.commands_ready.set()
        return True

    async def take_commands(self, key: str, timeout_s: float) -> list[Command]:
        """Node side: the driver's commands since the last take (waiting up to ``timeout_s``)."""
        box = self._boxes.get(key)
        if box is None:
            return [("close",)]
        if not box.commands:
            await _wait(box.commands_ready, timeout_s)
        commands, box.commands = box.commands, []
        box.commands_ready.clear()
        return commands

    async def ping(self) -> str:
        """An answer once the actor runs (the backend waits for it before the first sandbox)."""
        return "ok"


__all__ = ["Command", "Frame", "Relay"]
