"""A sandbox against its siblings and the zygote they were forked from, per backend.

The namespace backend forks every sandbox of a key from one pre-imported runtime, the zygote
(runner/runtime/zygote/: the isolation argument is its docstring). What must hold, here against
every backend (containers are siblings too): while one run holds a secret in its worker's
memory, a second run started after it (on the namespace backend: forked from the same zygote
after the first one was) finds that secret nowhere it can read, its own memory included (the
zygote's copy: the parent's run data), while the same scan finds the second run's own
argument (the control: the scan works); it sees no process but its own in ``/proc``; ``kill``
and ``ptrace`` reach no process of the other run and not the zygote, also given their host
pids; a ``kill(-1)`` of everything it may signal ends only its own worker. The first run then
completes, secret intact; the zygote is the same process before and after, and serves the next
run. The two runs overlap by construction, not by timing: the first one's model turn is served
by a host function that returns only once the second run has finished.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration._backends import backend, backend_entry
from tests.integration._episodes import Outcome, Project

pytestmark = pytest.mark.docker
__all__ = ["backend", "backend_entry"]  # fixtures

TOOLS = (Path(__file__).parents[1] / "fixtures" / "attacks" / "sibling_tools.py").read_text()
GATE = """
import os, time

def respond(request):
    open({held!r}, "w").close()
    deadline = time.monotonic() + 180
    while not os.path.exists({go!r}) and time.monotonic() < deadline:
        time.sleep(0.02)
    return {{"id": "g", "model": "gate-1", "usage": {{"prompt_tokens": 1,
            "completion_tokens": 1, "total_tokens": 2}},
            "choices": [{{"index": 0, "message": {{"role": "assistant", "content": "go"}}}}]}}
"""


def _host_pids(backend: Any) -> list[int]:
    """Host pids an attacker could be told: the zygotes' and every live sandbox's (namespace)."""
    found: list[int] = []
    zygotes = getattr(backend, "zygotes", None)
    if zygotes is not None:
        found += [pid for pid in zygotes.pids().values() if pid]
    records = getattr(backend, "records", None)
    if isinstance(records, Path) and records.is_dir():
        for path in records.glob("*.json"):
            pid = json.loads(path.read_text()).get("pid")
            if isinstance(pid, int):
                found.append(pid)
    return sorted(set(found))


def test_a_sibling_finds_nothing_of_another_run_and_reaches_neither_it_nor_the_zygote(
    backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    project = Project(tmp_path / "proj", TOOLS, module="sibling_tools")
    held, go = tmp_path / "held", tmp_path / "go"
    gate = f"gate_{uuid.uuid4().hex[:8]}"  # the host imports it once per name: one per test
    (project.root / f"{gate}.py").write_text(GATE.format(held=str(held), go=str(go)))
    (project.root / f"{gate}.py").chmod(0o644)
    secret, control = "SRMARK-" + uuid.uuid4().hex, "SRMARK-" + uuid.uuid4().hex
    holder_steps = (
        f"- {{id: hold, tool: sibling.hold, args: {{secret: {secret}}}}}\n"
        "- {id: wait, agent: {max_turns: 1}}\n"
        "- {id: after, tool: sibling.still_held}\n"
    )
    holder_wf = project.workflow(holder_steps, name="holder", model=f"{gate}:respond")
    holder: list[Outcome] = []
    state = tmp_path / "state"  # one tool snapshot: one zygote key for the three runs
    thread = threading.Thread(
        target=lambda: holder.append(
            project.run(backend, sandbox_image, holder_wf, state_dir=state)
        )
    )
    thread.start()
    try:
        deadline = time.monotonic() + 180
        while not held.exists() and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert held.exists(), "the holder never reached its model turn"
        # the namespace backend starting from zygotes (not its bwrap-per-sandbox way, not Docker)
        zygotes = (
            getattr(backend, "zygotes", None) if getattr(backend, "start", "") == "zygote" else None
        )
        zygotes_before = dict(zygotes.pids()) if zygotes is not None else {}
        digest = hashlib.sha256(secret.encode()).hexdigest()
        host_pids = _host_pids(backend)  # once: the attack is given these, and checked on them
        attack_steps = (
            "- {id: attack, tool: sibling.attack, args: "
            f"{{digest: {digest}, control: {control}, host_pids: {host_pids}}}}}\n"
            "- {id: kill, tool: sibling.kill_everything}\n"
        )
        attacker = project.run(
            backend,
            sandbox_image,
            project.workflow(attack_steps, name="attacker"),
            state_dir=state,
        )
    finally:
        go.touch()
        thread.join(180)
    assert holder, "the holder's run did not return"
    report = attacker.body("attack")
    # the scan works (its own argument is found) and finds nothing of the holder
    assert report["control_found"], report
    assert not report["holder_secret_found"], report
    # only its own processes, all in its own PID namespace (the runtime, PID 1, not dumpable,
    # lets no one read its namespace links)
    assert set(report["same_pid_namespace"].values()) <= {True, "EACCES"}, report
    assert 1 in report["visible"] and len(report["visible"]) < 10, report
    # nothing it named was another run's or the zygote's: the host pids do not exist here
    # the pids the attack was given (asked again, a zygote another test of this worker started
    # meanwhile had a pid the attack never saw)
    host = {str(pid) for pid in host_pids}
    for pid, outcome in report["signals"].items():
        if pid in host:
            assert outcome == "ESRCH", (pid, report)
    for pid in host:
        assert report["ptrace"].get(pid) == "ESRCH", report
        assert report["opened"].get(pid) == "ENOENT", report
    # kill(-1) ended its own worker, nothing else
    assert attacker.call("kill")["error"]["class"] == "runner.runtime.worker.wire.WorkerGone"
    (first,) = holder
    assert first.end["status"] == "succeeded", first.end
    assert first.body("after")["held"] == 3, first.body("after")
    assert first.body("after")["pid"] == first.body("hold")["pid"]  # the same worker lived on
    if zygotes is not None:  # the namespace backend: the zygote lived on, and serves again
        assert zygotes_before and zygotes.pids() == zygotes_before, (zygotes_before, zygotes)
        again = project.run(
            backend,
            sandbox_image,
            project.workflow("- {id: after, tool: sibling.still_held}\n", name="again"),
            state_dir=state,
        )
        assert again.end["status"] == "succeeded", again.end
        assert again.body("after")["held"] == 0  # a fresh worker: nothing of the holder's
        assert zygotes.pids() == zygotes_before
