"""A child process in a group of its own, and killing that group, on POSIX and on Windows.

``record`` runs the runtime as a local process (`runner.backends.unsandboxed`), also on the
Windows and macOS laptops the tool's users have. POSIX: the child starts a session
of its own (``start_new_session``) and the whole group is killed with ``os.killpg(pid,
SIGKILL)``. Windows has neither: the child starts in a new process group
(``CREATE_NEW_PROCESS_GROUP``) and the tree is ended with ``taskkill /F /T /PID`` (the child
and every process it started), falling back to ``TerminateProcess`` of the child alone
(`subprocess.Popen.kill`) when ``taskkill`` cannot run. The branch is chosen by what the ``os``
module has, not by the platform's name, so a host without ``killpg`` never calls it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import suppress
from typing import Any

__all__ = ["group_kwargs", "kill_group"]

_CREATE_NEW_PROCESS_GROUP = 0x00000200  # subprocess.CREATE_NEW_PROCESS_GROUP (Windows only)


def group_kwargs() -> dict[str, Any]:
    """``subprocess.Popen`` keyword arguments that start the child in a group of its own."""
    if hasattr(os, "killpg"):
        return {"start_new_session": True}
    flag = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", _CREATE_NEW_PROCESS_GROUP)
    return {"creationflags": flag}


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process`` and the processes it started (its group), if it still runs.

    A group already gone is not an error.
    """
    if process.poll() is not None:
        return
    killpg = getattr(os, "killpg", None)
    if killpg is not None:
        with suppress(ProcessLookupError):
            killpg(process.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
        return
    with suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["taskkill", "/F", "/T", "/PID", str(process.pid)],
            capture_output=True,
            timeout=30,
            check=False,
        )
    with suppress(OSError):
        if process.poll() is None:
            process.kill()
