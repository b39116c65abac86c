"""The namespace backend's zygote ends: it is replaced, no run is lost or charged twice.

A zygote (runner/runtime/zygote/, runner/backends/namespace/zygotes.py) killed between
sandboxes is replaced on the next one; killed while a run is in flight, that run ends
``infra_error`` naming the zygote (its sandbox ended with it: the zygote is the init of the PID
namespace its sandboxes' are nested in), is charged once for what it ran, the job's later runs
go to a fresh zygote, and ``submit --resume`` runs the lost one again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from runner.backends.base import SandboxSpec
from runner.backends.namespace import NamespaceBackend
from runner.ledger import Ledger
from tests.integration.conformance.backends import NAMESPACE_ROOT
from tests.integration.test_submit_crash import TOOLS, WORKFLOW  # the slow.wait project

pytestmark = pytest.mark.docker
CLI = str(Path(sys.executable).parent / "sandbox-replay")


def _zygote_processes(ancestor: int) -> list[int]:
    """Pids of the zygote interpreters (``--zygote``) among the descendants of ``ancestor``."""
    found, frontier = [], [ancestor]
    while frontier:
        pid = frontier.pop()
        try:
            children = [
                int(c)
                for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()
            ]
        except OSError:
            continue
        for child in children:
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            # the interpreter itself (bwrap's argv names it too; its forks keep its argv, so
            # only the one whose parent is bwrap)
            if argv[0].endswith(b"python3") and b"--zygote" in argv:
                parent = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if parent.endswith(b"bwrap"):
                    found.append(child)
            frontier.append(child)
    return found


def test_a_killed_zygote_is_replaced_by_the_next_sandbox(
    bwrap_usable: str, sandbox_image: str
) -> None:
    backend = NamespaceBackend(NAMESPACE_ROOT, session_id=f"zyg-{uuid.uuid4().hex[:10]}")

    def run() -> bytes:
        spec = SandboxSpec(
            run_id=f"zyg-{uuid.uuid4().hex[:10]}",
            image=sandbox_image,
            command=("python3", "-c", "print('ran')"),
        )
        with backend.sandbox(spec) as box:
            out = b"".join(f[1] for f in box.frames(0.2) if f is not None)
            assert box.wait(30).exit_code == 0
        return out

    def ours() -> list[int]:  # this backend's zygotes (other tests' may live in this process)
        return [z for pid in backend.zygotes.pids().values() if pid for z in _zygote_processes(pid)]

    try:
        assert b"ran" in run()
        (first,) = ours()
        bwraps = list(backend.zygotes.pids().values())
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while backend.zygotes.pids() and time.monotonic() < deadline:
            time.sleep(0.05)  # the zygote's bwrap ended with it, and the backend saw it
        assert b"ran" in run()
        (second,) = ours()
        assert second != first and backend.zygotes.started == 2
    finally:
        backend.close()
    assert backend.zygotes.pids() == {}
    assert all(not Path(f"/proc/{pid}").exists() for pid in bwraps)  # closed with the backend


def _project(root: Path) -> Path:
    root.mkdir(parents=True)
    root.chmod(0o755)
    tasks = [{"task_id": "t1", "input": {"sleep_s": 6}}]
    tasks += [{"task_id": f"t{i}", "input": {"sleep_s": 0}} for i in (2, 3, 4)]
    files = {
        "slow_tools.py": TOOLS,
        "slow.yaml": WORKFLOW,
        "tasks.jsonl": "".join(json.dumps(t) + "\n" for t in tasks),
    }
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


def _submit(work: Path, image: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.update(
        {
            "SANDBOX_REPLAY_STATE_DIR": str(work / "state"),
            "SANDBOX_REPLAY_IMAGE": image,
            "SANDBOX_REPLAY_BACKEND": "namespace",
        }
    )
    return subprocess.Popen(
        [CLI, "--log-format", "json", "submit", *args, "--json"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_run_whose_zygote_dies_is_infra_error_charged_once_and_resumed(
    bwrap_usable: str, sandbox_image: str, tmp_path: Path
) -> None:
    work = _project(tmp_path / "work")
    proc = _submit(
        work,
        sandbox_image,
        "--variant",
        "slow.yaml",
        "--tasks",
        "tasks.jsonl",
        "--concurrency",
        "1",
    )
    killed: list[int] = []

    def kill_during_t1() -> None:
        """Kill the zygote once t1's sandbox (the first, sleeping 6 s) has run for a second."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            traces = list((work / "state" / "traces").glob("*.jsonl"))
            zygotes = _zygote_processes(proc.pid)
            if traces and zygotes and any('"t1"' in t.read_text() for t in traces):
                time.sleep(1.0)
                for pid in zygotes:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_during_t1)
    killer.start()
    out, err = proc.communicate(timeout=300)
    killer.join()
    assert killed, err[-3000:]
    report = json.loads(out)
    assert report["runs_by_status"] == {"infra_error": 1, "succeeded": 3}, report
    job = report["job_id"]
    lost = [
        json.loads(t.read_text().splitlines()[-1])
        for t in (work / "state" / "traces").glob("*.jsonl")
        if '"t1"' in t.read_text().splitlines()[0]
    ]
    assert [end["status"] for end in lost] == ["infra_error"], lost
    assert "namespace zygote" in json.dumps(lost[0]), lost[0]
    with Ledger.for_state_dir(work / "state") as ledger:
        charges = [c for c in ledger.charges(job) if c.kind == "run"]
    keys = [c.key for c in charges]
    assert len(keys) == len(set(keys)) == 4, charges  # one charge per run, none twice
    assert all(c.state == "settled" and c.actual is not None for c in charges), charges
    assert all(c.actual.sandbox_s < 30 for c in charges if c.actual is not None), charges
    # the three later runs went to a fresh zygote; --resume runs the lost one again
    again = _submit(work, sandbox_image, "--resume", job)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    resumed = json.loads(out)
    assert resumed["status"] == "complete", resumed
    with Ledger.for_state_dir(work / "state") as ledger:
        after = [c for c in ledger.charges(job) if c.kind == "run"]
    assert len(after) == 5 and len({c.key for c in after}) == 5, after  # t1 once more, new key
    assert {c.key: c.actual for c in after if c.key in keys} == {c.key: c.actual for c in charges}
