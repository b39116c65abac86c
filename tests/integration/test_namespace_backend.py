"""What only the namespace backend must show: its uid map, its owner's death, its records.

A mount bwrap cannot make is the backend's `InfrastructureError` (exit 6) in bwrap's own words.
The shared properties are the conformance suite's and the attack battery's (both run once per
backend); these are the bwrap-specific ones: the sandbox's processes run as its own host uid
(never host root: bwrap run by root would map the sandbox's uid there), a SIGKILLed owner
takes its sandboxes with it (``--die-with-parent``, and the launcher's parent-death signal
before bwrap sets its own), and a retried run id meets its record, not a second sandbox.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.backends.base import Mount, SandboxSpec
from runner.backends.labels import process_start_time
from runner.backends.namespace import NamespaceBackend
from runner.errors import InfrastructureError
from tests.integration.conformance.backends import NAMESPACE_ROOT

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def backend(bwrap_usable: str, sandbox_image: str) -> Iterator[NamespaceBackend]:
    made = NamespaceBackend(NAMESPACE_ROOT, session_id=f"nsb-{uuid.uuid4().hex[:10]}")
    yield made
    made.close()  # its zygotes


def _spec(image: str, *command: str) -> SandboxSpec:
    return SandboxSpec(run_id=f"nsb-{uuid.uuid4().hex[:10]}", image=image, command=command)


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_descendants(int(child))]
    return found


def _host_uids(pid: int) -> list[int]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    uid_line = next(line for line in status if line.startswith("Uid:"))
    return [int(u) for u in uid_line.split()[1:]]


def test_the_sandbox_runs_as_its_own_host_uid_never_host_root(
    backend: NamespaceBackend, sandbox_image: str
) -> None:
    """Seen from the host, bwrap and every process inside run as the sandbox uid, all four ids."""
    host_uid = 10001 if os.geteuid() == 0 else os.geteuid()
    with backend.sandbox(_spec(sandbox_image, "sleep", "30")) as box:
        deadline = time.monotonic() + 10
        while not _descendants(box.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        inside = _descendants(box.pid)
        assert inside, "no process inside the sandbox"
        for pid in [box.pid, *inside]:
            assert _host_uids(pid) == [host_uid] * 4, (pid, _host_uids(pid))
        box.kill()


def test_a_retried_run_id_meets_its_record_not_a_second_sandbox(
    backend: NamespaceBackend, sandbox_image: str
) -> None:
    spec = _spec(sandbox_image, "sleep", "30")
    with backend.sandbox(spec) as first:
        with pytest.raises(InfrastructureError, match="already exists"), backend.sandbox(spec):
            pass
        assert first.is_running()
        assert len(backend.sandboxes(session_only=True)) == 1
    assert backend.sandboxes(session_only=True) == []


def test_a_mount_bwrap_cannot_make_is_an_infrastructure_error_in_bwraps_words(
    backend: NamespaceBackend, sandbox_image: str, tmp_path: Path
) -> None:
    """bwrap that exits before the runtime's first byte could not set up: exit 6, not a crash."""
    gone = tmp_path / "gone"  # staged by the launcher (a 0700 folder) or found missing by bwrap
    cases = (
        (Mount(gone, "/opt/gone"), str(gone)),
        (Mount(Path("/etc/hostname"), "/proc/sys/kernel/x"), "bwrap: Can't create file at /proc"),
    )
    for mount, said in cases:
        bad = SandboxSpec(
            run_id=_spec(sandbox_image).run_id,
            image=sandbox_image,
            command=("python3", "-c", "print(1)"),
            mounts=(mount,),
        )
        with pytest.raises(InfrastructureError) as caught, backend.sandbox(bad) as box:
            for _ in box.frames(0.2):
                pass
            box.wait(30)
        assert "could not set up the sandbox" in str(caught.value)
        assert said in str(caught.value), caught.value
    assert backend.sandboxes(session_only=True) == []


OWNER = """
import sys
from pathlib import Path
from runner.backends.base import Mount, SandboxSpec
from runner.backends.namespace import NamespaceBackend
backend = NamespaceBackend(Path(sys.argv[1]), session_id=sys.argv[2])
spec = SandboxSpec(run_id=sys.argv[2] + "-run", image=sys.argv[3], command=("sleep", "300"))
with backend.sandbox(spec) as box:
    print(box.pid, flush=True)
    sys.stdin.read()
"""


def _alive(pid: int, started: str | None) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and process_start_time(pid) == started


def test_a_sigkilled_owner_takes_its_sandbox_with_it(sandbox_image: str, bwrap_usable: str) -> None:
    session = f"die-{uuid.uuid4().hex[:10]}"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(NAMESPACE_ROOT), session, sandbox_image],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        line = ""
        for _ in range(50):  # log lines may come first
            line = owner.stdout.readline().strip()
            if line.isdigit():
                break
        pid = int(line)
        started = process_start_time(pid)
        assert started is not None  # running
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    deadline = time.monotonic() + 10
    while _alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid, started), "the sandbox outlived its owner"
    reaper = NamespaceBackend(NAMESPACE_ROOT, session_id=f"reaper-{uuid.uuid4().hex[:6]}")
    reaped = [r for r in reaper.reap() if r.run_id == f"{session}-run"]
    assert len(reaped) == 1 and reaped[0].sandbox_s is not None
    assert not any(Path(NAMESPACE_ROOT, "sandboxes").glob(f"*{session}*"))
