"""The reaper's liveness probe on Windows, with a fake kernel32 (no Windows needed).

On Windows ``os.kill(pid, 0)`` sends CTRL_C_EVENT to a process group: the probe must go
through ``OpenProcess`` / ``GetExitCodeProcess`` there and never call ``os.kill``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from runner.backends import labels


class FakeKernel32:
    def __init__(self, *, handle: int, exit_code: int = 259, query_ok: bool = True) -> None:
        self.handle = handle
        self.exit_code = exit_code
        self.query_ok = query_ok
        self.opened: list[tuple[int, bool, int]] = []
        self.closed: list[int] = []

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:
        self.opened.append((access, inherit, pid))
        return self.handle

    def GetExitCodeProcess(self, handle: int, ref: Any) -> bool:
        assert handle == self.handle
        ref._obj.value = self.exit_code
        return self.query_ok

    def CloseHandle(self, handle: int) -> bool:
        self.closed.append(handle)
        return True


@pytest.fixture
def win32(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Pretend to be Windows; any os.kill call fails the test."""

    def no_kill(pid: int, sig: int) -> None:
        raise AssertionError(f"os.kill({pid}, {sig}) called on win32")

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(os, "kill", no_kill)

    def install(kernel32: FakeKernel32, last_error: int = 0) -> FakeKernel32:
        monkeypatch.setattr(labels, "_win32_api", lambda: (kernel32, lambda: last_error))
        return kernel32

    return install


def test_a_running_process_is_alive_and_its_handle_closed(win32: Any) -> None:
    kernel32 = win32(FakeKernel32(handle=77, exit_code=labels.STILL_ACTIVE))
    assert labels._pid_exists(4242) is True
    assert kernel32.opened == [(0x1000, False, 4242)] and kernel32.closed == [77]


def test_an_exited_process_is_dead(win32: Any) -> None:
    kernel32 = win32(FakeKernel32(handle=77, exit_code=0))
    assert labels._pid_exists(4242) is False and kernel32.closed == [77]


def test_no_handle_is_dead_unless_access_is_denied(win32: Any) -> None:
    win32(FakeKernel32(handle=0), last_error=87)  # ERROR_INVALID_PARAMETER: no such pid
    assert labels._pid_exists(4242) is False
    win32(FakeKernel32(handle=0), last_error=5)  # ERROR_ACCESS_DENIED: another user's
    assert labels._pid_exists(4242) is True


def test_an_unreadable_exit_code_counts_as_alive(win32: Any) -> None:
    kernel32 = win32(FakeKernel32(handle=9, exit_code=0, query_ok=False))
    assert labels._pid_exists(4242) is True and kernel32.closed == [9]


def test_owner_is_dead_on_win32_never_calls_os_kill(win32: Any) -> None:
    win32(FakeKernel32(handle=0), last_error=87)
    owner = labels.Owner(host="h", pid=os.getpid() + 100_000, start="")
    assert labels.owner_is_dead(owner, this_host="h") is True
