"""Run the installed ``sandbox-replay`` command the way a user does, for integration tests.

One helper for every test that runs the CLI in a subprocess: the state folder inside the
test's project (``SANDBOX_REPLAY_STATE_DIR``), the sandbox image under test
(``SANDBOX_REPLAY_IMAGE``), a timeout, and ``--json`` output decoded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI = str(Path(sys.executable).parent / "sandbox-replay")


def run_cli(
    args: list[str],
    cwd: Path,
    image: str,
    *,
    state: Path | None = None,
    timeout: float = 300,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``sandbox-replay ARGS`` in ``cwd`` with its state in ``state`` (default ``cwd/state``),
    ``extra_env`` added to the environment."""
    env = dict(os.environ)
    env.update(
        {"SANDBOX_REPLAY_STATE_DIR": str(state or cwd / "state"), "SANDBOX_REPLAY_IMAGE": image}
    )
    env.update(extra_env or {})
    return subprocess.run(
        [CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_cli_json(
    args: list[str], cwd: Path, image: str, *, state: Path | None = None, timeout: float = 300
) -> tuple[int, Any, str]:
    """`run_cli` with ``--json`` appended: (exit code, the decoded stdout, stderr)."""
    done = run_cli([*args, "--json"], cwd, image, state=state, timeout=timeout)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def sigint_as_default() -> None:
    """``preexec_fn`` for a child the test stops with SIGINT: its SIGINT back to the default.

    A test run started as a background job (``cmd &`` in a non-interactive shell: POSIX has it
    ignore SIGINT) passes SIG_IGN on to every child, and a Python child that starts with SIGINT
    ignored keeps it so: it never sees the KeyboardInterrupt it is tested for (both view tests
    timed out so in a backgrounded ``.ci/run``, and passed in the foreground).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
