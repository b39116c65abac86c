"""A bubblewrap set-up failure is the backend's failure, exit 6, never the run's crash.

bwrap (or the launcher in front of it) that exits before the runtime wrote a byte of its
``hello`` could not make the sandbox: a mount it cannot make, a missing program. Its stderr
(bounded, control characters escaped) is in the `InfrastructureError`'s message; the episode
is ``infra_error``. A runtime that spoke first and then died is still the run's ``crashed``.
The bwrap process is stood in for by ``sh`` printing what bwrap prints (no namespaces here;
the real one: tests/integration/test_namespace_commands.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runner.backends.base import Backend, Reaped, SandboxSpec
from runner.backends.namespace.sandbox import SETUP_STDERR_BYTES, NamespaceSandbox
from runner.errors import InfrastructureError

BWRAP_SAYS = "bwrap: Can't find source path /nowhere: No such file or directory"


def _box(script: str) -> NamespaceSandbox:
    process = subprocess.Popen(
        ["/bin/sh", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return NamespaceSandbox("sandbox-replay-r1-s", "r1", process)


def _ended(box: NamespaceSandbox) -> Any:
    for _ in box.frames(0.1):
        pass
    try:
        return box.wait(10)
    finally:
        box.close()


def test_bwrap_exiting_before_any_output_is_an_infrastructure_error_with_its_stderr() -> None:
    box = _box(f'echo "{BWRAP_SAYS}" >&2; exit 1')
    with pytest.raises(InfrastructureError) as caught:
        _ended(box)
    message = str(caught.value)
    assert "could not set up the sandbox sandbox-replay-r1-s" in message
    assert BWRAP_SAYS in message and caught.value.exit_code == 6


def test_a_launcher_step_failing_is_one_too() -> None:
    box = _box("echo 'mount: /mnt: permission denied.' >&2; exit 126")
    with pytest.raises(InfrastructureError, match="mount: /mnt: permission denied"):
        _ended(box)


def test_bwraps_stderr_in_the_message_is_bounded_and_inert() -> None:
    hostile = "printf 'bwrap: \\033[31mred\\033]0;title\\007 \\342\\200\\256' >&2"
    flood = "head -c 100000 /dev/zero | tr '\\0' x >&2"
    box = _box(f"{hostile}; {flood}; exit 1")
    with pytest.raises(InfrastructureError) as caught:
        _ended(box)
    message = str(caught.value)
    assert "\x1b" not in message and "\x07" not in message and "\u202e" not in message
    assert "\\x1b[31mred" in message and "\\u202e" in message
    assert len(message) < SETUP_STDERR_BYTES + 300


def test_a_runtime_that_spoke_then_died_is_the_runs_crash_not_the_backends() -> None:
    box = _box(f'echo \'{{"type": "hello"}}\'; echo "{BWRAP_SAYS}" >&2; exit 1')
    assert _ended(box).exit_code == 1
    killed = _box(f'echo "{BWRAP_SAYS}" >&2; exec sleep 30')
    killed.kill()  # the host's kill (a deadline): its own status, never a set-up failure
    assert _ended(killed).killed_by_host


class _FailingBwrap(Backend):
    """The namespace backend whose bwrap cannot make a mount."""

    name = "namespace"

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[NamespaceSandbox]:
        box = _box(f'echo "{BWRAP_SAYS}" >&2; exit 1')
        try:
            yield box
        finally:
            box.kill()
            box.close()

    def engine_cpus(self) -> float | None:
        return None

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        return []


def test_the_episode_is_infra_error_with_bwraps_words(tmp_path: Path) -> None:
    from runner.runs.run import execute_run
    from runner.settings import Settings
    from tests.support.paths import REPO

    helpdesk = REPO / "examples" / "helpdesk"
    result = execute_run(
        Settings(state_dir=tmp_path / "state"),
        helpdesk / "v1.yaml",
        helpdesk / "tasks.jsonl",
        "ticket-1000",
        backend=_Describing(),
    )
    assert result.status == "infra_error" and result.infrastructure_failed, result.end
    assert BWRAP_SAYS in str(result.end.get("reason")), result.end


class _Describing(_FailingBwrap):
    """Describes the tools in a local process (trusted fixtures), then fails the episode's bwrap."""

    def __init__(self) -> None:
        from runner.backends.unsandboxed import UnsandboxedProcessBackend

        self.local = UnsandboxedProcessBackend()

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Any]:
        if spec.run_id.startswith("manifest-"):
            with self.local.sandbox(spec) as box:
                yield box
            return
        with super().sandbox(spec) as box:
            yield box
