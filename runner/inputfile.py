"""The one bounded reader of files the host reads from users: regular files only, size-limited.

Workflows, policies, job files, task files, traces, tool manifests, import sources, effect
maps, reviewer packets and the members of an unpacked packet are all read through
`read_input` (whole) or `open_input` (as a stream). Both:

- open with ``O_NONBLOCK`` (a FIFO with no writer does not block the open) and ``fstat`` the
  *opened* descriptor (no race with a rename): anything but a regular file (a FIFO, a socket,
  ``/dev/zero`` or another device, a folder) is an `InputError` naming the file and its kind;
  a symbolic link is followed and judged by what it points to;
- never read more than the limit of the file's kind (`LIMITS`, bytes): a larger file, or one
  that grows past the limit while it is read, is an `InputError` saying the limit;
- turn a read that fails (``EIO`` from ``/proc/self/mem``, a failing disk) into an
  `InputError` naming the file, like a failed open.

Standard library only, Python 3.9+ (like `runner.errors`, whose `InputError` it raises).
"""

import io
import os
import stat
from typing import BinaryIO, Dict, Union

from runner.errors import InputError

__all__ = ["LIMITS", "open_input", "read_input"]

_MIB = 1024 * 1024

LIMITS: Dict[str, int] = {
    "workflow": 4 * _MIB,
    "policy": 4 * _MIB,
    "job file": 4 * _MIB,
    "tool manifest": 16 * _MIB,
    "tool source": 16 * _MIB,
    "effect map": 4 * _MIB,
    "egress baseline": 4 * _MIB,
    "job record": 64 * _MIB,
    "task file": 512 * _MIB,
    "import source": 512 * _MIB,
    "trace": 1024 * _MIB,
    "packet": 1024 * _MIB,
}
"""Largest file of each kind, in bytes. A trace line is also limited on its own
(`runner.tracetools.reader.MAX_LINE_BYTES`); a packet's unpacked members together are limited by
`runner.reproduce.inputs.MAX_PACKET_BYTES`."""

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _limit(kind: str) -> int:
    try:
        return LIMITS[kind]
    except KeyError:
        raise ValueError(f"unknown input kind {kind!r}") from None


def _refused(kind: str, name: str, reason: str) -> InputError:
    """``FILE: cannot read KIND: REASON``, with ``reason`` also as a field.

    Callers that name the file their own way (a workflow's ``tools`` entry) reuse the reason.
    """
    return InputError(f"cannot read {kind}: {reason}", file=name, reason=reason)


def _too_large(kind: str, limit: int, name: str) -> InputError:
    return _refused(kind, name, f"larger than {limit} bytes, the limit for a {kind}")


def _folder(kind: str, name: str) -> InputError:
    return _refused(kind, name, "it is a folder, not a file")


def _open_checked(name: str, kind: str, limit: int) -> int:
    """A descriptor of ``name`` once it is known to be a regular file within ``limit``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    flags |= getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise _refused(kind, name, "no such file") from None
    except IsADirectoryError:
        raise _folder(kind, name) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise _refused(kind, name, str(getattr(exc, "strerror", None) or exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _folder(kind, name)
        if not stat.S_ISREG(info.st_mode):
            what = next((text for test, text in _KINDS if test(info.st_mode)), "no regular file")
            raise _refused(
                kind,
                name,
                f"it is {what}, not a regular file (reading it could block or never end)",
            )
        if info.st_size > limit:
            raise _too_large(kind, limit, name)
    except OSError as exc:
        os.close(fd)
        raise _refused(kind, name, str(exc.strerror or exc)) from None
    except InputError:
        os.close(fd)
        raise
    return fd


class _Bounded(io.RawIOBase):
    """A raw reader over a regular file that fails once it reads past offset ``limit``.

    Seekable (``tarfile`` seeks back in a packet); the limit is on the offset reached, so
    reading a part twice does not count twice.
    """

    def __init__(self, fd: int, limit: int, kind: str, name: str) -> None:
        super().__init__()
        self._file = io.FileIO(fd, "rb", closefd=True)
        self._limit = limit
        self._kind = kind
        self.name = name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: "memoryview") -> int:  # type: ignore[override]
        try:
            count = self._file.readinto(buffer)
        except OSError as exc:  # a "regular" file that fails when read: /proc/self/mem, EIO
            raise _refused(self._kind, self.name, str(exc.strerror or exc)) from None
        if count is None:  # not for a regular file; kept for the type
            return 0
        if self._file.tell() > self._limit:
            raise _too_large(self._kind, self._limit, self.name)
        return count

    def close(self) -> None:
        self._file.close()
        super().close()


def open_input(path: Union[str, "os.PathLike[str]"], kind: str) -> BinaryIO:
    """Open a user's file of ``kind`` as a buffered binary stream with the kind's size limit.

    Args:
        path: the file (a symbolic link is followed).
        kind: a key of `LIMITS` (``trace``, ``task file``, ...); it also names the file in
            messages.

    Returns:
        A binary stream (close it, e.g. with ``with``); reading past the limit raises.

    Raises:
        InputError: missing, unreadable, not a regular file, larger than the limit (also
            when it grows past it while being read).
        ValueError: ``kind`` is not a key of `LIMITS` (a programming error).
    """
    limit = _limit(kind)
    name = os.fspath(path)
    fd = _open_checked(name, kind, limit)
    return io.BufferedReader(_Bounded(fd, limit, kind, name))


def read_input(path: Union[str, "os.PathLike[str]"], kind: str) -> bytes:
    """The bytes of a user's file of ``kind``, read whole (the rules of `open_input`).

    Raises:
        InputError: missing, unreadable, not a regular file or larger than the kind's limit.
        ValueError: ``kind`` is not a key of `LIMITS`.
    """
    with open_input(path, kind) as stream:
        return stream.read()
