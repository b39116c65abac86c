"""The driver keeps its model keys out of every process environment cluster code can read.

On a Ray cluster, code from any client of the cluster may run on the driver's machine (a task
placed on its node), as the user who started that node's Ray. On Linux a process of the same
user (and root) reads another's environment from ``/proc/PID/environ``: the environment block
the process was started with, which removing a variable from ``os.environ`` (``unsetenv``)
leaves in place (a joined node read the driver's ``OPENAI_API_KEY`` there).

`seal_driver`, called before the driver joins a cluster:

- removes the provider variables (`PROVIDER_VARIABLES`) from ``os.environ``, so no process
  this one starts (Ray starts none when it joins a running cluster; measured) inherits them;
- overwrites each such ``NAME=value`` in the process's initial environment block with NUL
  bytes (its bounds are ``env_start``/``env_end`` of ``/proc/self/stat``, written through
  ``/proc/self/mem``), so ``/proc/PID/environ`` no longer holds them, for root either;
- makes the process not dumpable (``prctl(PR_SET_DUMPABLE, 0)``): its ``/proc/PID`` files
  become root's, so processes of the same user cannot read its environment or memory, nor
  ptrace it (the keys still live in its memory: root can read them; see the threat model).

The caller reads the keys into the settings first (`runner.cli.backend_choice`): the providers
then find them there, never in the environment. Linux only: elsewhere the environment block
cannot be located, so a driver that holds a provider variable refuses to join (`seal_driver`).

May import: `runner.errors` and the standard library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import MutableMapping

from runner.errors import InfrastructureError

# The variables a provider key or an endpoint (whose URL may carry credentials) is read from:
# runner.settings (SANDBOX_REPLAY_*) and the providers' host fallbacks (runner.providers).
PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "SANDBOX_REPLAY_OPENAI_API_KEY",
    "SANDBOX_REPLAY_OPENAI_BASE_URL",
    "SANDBOX_REPLAY_ANTHROPIC_API_KEY",
    "SANDBOX_REPLAY_ANTHROPIC_BASE_URL",
)
_PR_SET_DUMPABLE = 4
# /proc/PID/stat fields (1-based, proc(5)): 50 env_start, 51 env_end (Linux >= 3.5).
_ENV_START_FIELD = 50


def environment_block_bounds(stat: str) -> tuple[int, int]:
    """``(env_start, env_end)`` from the text of ``/proc/PID/stat``.

    The second field (the command name) may hold spaces and parentheses: the fields after it
    are counted from the last ``)``.

    Raises:
        ValueError: the text has too few fields.
    """
    rest = stat[stat.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state)
    start, end = int(rest[_ENV_START_FIELD - 3]), int(rest[_ENV_START_FIELD - 2])
    if not 0 < start <= end:
        raise ValueError(f"no environment block in /proc/self/stat: {start}..{end}")
    return start, end


def wipe_from_block(block: bytes, names: tuple[str, ...]) -> tuple[bytes, list[str]]:
    """``block`` (NUL-separated ``NAME=value`` entries) with the entries of ``names`` zeroed.

    Returns:
        ``(new block of the same length, names found)``; entries are matched whole (a
        variable ``XOPENAI_API_KEY`` is not ``OPENAI_API_KEY``).
    """
    out = bytearray(block)
    found: list[str] = []
    wanted = {n.encode() for n in names}
    offset = 0
    for entry in block.split(b"\0"):
        name = entry.split(b"=", 1)[0]
        if b"=" in entry and name in wanted:
            out[offset : offset + len(entry)] = bytes(len(entry))
            found.append(name.decode())
        offset += len(entry) + 1
    return bytes(out), found


def _wipe_initial_block(names: tuple[str, ...]) -> list[str]:
    """Zero ``names`` in this process's initial environment block; the names it held.

    Raises:
        InfrastructureError: the block cannot be read or written.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            start, end = environment_block_bounds(stat.read())
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            new, found = wipe_from_block(block, names)
            if found:
                mem.seek(start)
                mem.write(new)
    except (OSError, ValueError) as exc:
        raise InfrastructureError(
            f"cannot remove the provider keys from this process's environment block: {exc}"
        ) from exc
    return found


def _not_dumpable() -> None:
    """``prctl(PR_SET_DUMPABLE, 0)`` on this process.

    Raises:
        InfrastructureError: the call failed.
    """
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise InfrastructureError(f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(errno)}")


def seal_driver(
    environ: MutableMapping[str, str] | None = None, *, platform: str | None = None
) -> list[str]:
    """Remove the provider variables from this process's environment, everywhere it is kept.

    Args:
        environ: the mapping to remove them from; None (the default) is ``os.environ``, and
            then also the environment block and the dumpable flag of this process.
        platform: ``sys.platform`` (for tests).

    Returns:
        The names that were removed from ``environ`` or the environment block.

    Raises:
        InfrastructureError: not on Linux while a provider variable is set (its environment
            block cannot be cleared there), or the block cannot be cleared, or the process
            cannot be made not dumpable.
    """
    env = os.environ if environ is None else environ
    present = [n for n in PROVIDER_VARIABLES if n in env]
    if (platform or sys.platform) != "linux":
        if present:
            raise InfrastructureError(
                "--backend ray keeps provider keys out of the driver's environment, which only"
                f" works on Linux; this driver holds {', '.join(present)}",
                fix="run submit on a Linux machine, or without those variables",
            )
        return []
    for name in present:
        env.pop(name, None)
    if environ is not None:  # a mapping of the caller's: this process is left as it is
        return present
    wiped = _wipe_initial_block(PROVIDER_VARIABLES)
    _not_dumpable()
    return sorted(set(present) | set(wiped))


__all__ = [
    "PROVIDER_VARIABLES",
    "environment_block_bounds",
    "seal_driver",
    "wipe_from_block",
]
