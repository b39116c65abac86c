"""Tool code in the worker against the runtime, PID 1 of the sandbox (real containers).

The runtime holds the channel and the record; tools run in its worker (runner/runtime/worker/),
same uid, no capability. Each attack here is what the worker can do, and each test asserts what
the host witnesses: the runtime is untouched (the episode arrives, its record is the runtime's)
and the attack is contained and, when it touches the pipe, named in the episode. The kernel's
rules behind it (runner/runtime/pid1.py): signals from inside a namespace to its init are
dropped without a handler; /proc of a non-dumpable process is root-owned; ptrace needs
PTRACE_MODE_ATTACH. Each probe runs the same attack on a same-uid process of its own as the
control, so a pass is not an attack that never worked. Hostile tools:
tests/fixtures/attacks/hostile_tools.py.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from runner.runtime.worker.fork import ENV_WORKER_START
from tests.integration._episodes import Project
from tests.integration._hostile import backend, backend_entry, project, run_steps, stderr_of

pytestmark = pytest.mark.docker
__all__ = ["backend", "backend_entry", "project"]  # fixtures
OVERFLOW_UID = 65534  # how a user namespace shows an unmapped id (/proc/sys/kernel/overflowuid)


def test_the_runtime_is_pid_1_and_not_dumpable(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: p, tool: pid1.probe}\n")
    assert out.end["status"] == "succeeded", out.end
    report = out.call("p")
    probe = json.loads(report["body"])
    pid1, control = probe["pid1"], probe["control"]
    assert probe["uid"] != 0
    # the control: the same attacks on a same-uid, dumpable process of the tool's own all work
    assert control["fd"].startswith("listed") and control["environ"] == "read", control
    assert control["ptrace"] == "attached" and control["owner"] == probe["uid"], control
    # PID 1 (the runtime, not dumpable): its /proc is root's, nothing opens, no ptrace. Root is
    # 0 without a user namespace (Docker) and the overflow id 65534 inside one that does not
    # map host root (the namespace backend); never the sandbox's own uid.
    assert pid1["owner"] in (0, OVERFLOW_UID) and pid1["owner"] != probe["uid"], pid1
    assert pid1["fd"] == "EACCES" and pid1["fd1"] == "EACCES", pid1
    assert pid1["environ"] == "EACCES" and pid1["mem"] == "EACCES", pid1
    assert pid1["ptrace"] == "EPERM", pid1


def test_signals_from_the_worker_do_not_reach_pid_1(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    steps = "- {id: s, tool: pid1.signals}\n- {id: after, tool: pid1.orphans, args: {count: 1}}\n"
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    sent = json.loads(out.call("s")["body"])
    assert sent["child_exit"] == 0  # kill() "succeeded": the kernel drops them silently
    assert sent["pid1_state"] in ("S", "R"), sent  # not stopped (T), not gone
    assert sent["me"] != 1  # the tool ran in the worker, not in PID 1
    # the runtime lived on: the next step ran, the episode and its record arrived
    assert out.end["status"] == "succeeded", out.end
    assert [c["tool"] for c in out.calls] == ["pid1.signals", "pid1.orphans"]


def test_orphans_are_reaped_by_pid_1(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: o, tool: pid1.orphans, args: {count: 30}}\n",
    )
    assert out.end["status"] == "succeeded", out.end
    assert json.loads(out.call("o")["body"]) == {"zombies": 0}


def test_a_forged_call_line_on_the_pipe_is_not_believed_and_named(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: f, tool: pipe.forge}\n")
    assert all(c.get("tool") != "world.launch" for c in out.calls), out.calls
    assert out.end["output"] != "FORGED", out.end
    assert out.end["status"] == "failed", out.end
    assert out.end["failure"]["error_class"] == "runner.runtime.worker.wire.WorkerProtocolError"
    assert "answers nothing" in out.end["error"]["message"], out.end["error"]


def test_a_flood_on_the_pipe_is_bounded_and_named(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: f, tool: pipe.flood}\n")
    assert out.end["status"] == "failed", out.end
    assert out.end["failure"]["error_class"] == "runner.runtime.worker.wire.WorkerProtocolError"
    assert "discarded" in out.end["error"]["message"], out.end["error"]


def test_a_worker_that_closes_its_pipe_fails_the_call_not_the_runtime(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: c, tool: pipe.close}\n")
    assert out.end["status"] == "failed", out.end
    assert out.call("c")["error"]["class"] == "runner.runtime.worker.wire.WorkerGone"
    assert out.end["failure"]["tool"] == "pipe.close"


def test_a_child_that_outlives_the_worker_is_killed_with_the_sandbox(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The worker exits, its daemon child (own session) lingers: the episode still ends, and
    the sandbox goes with PID 1 (the kernel kills a namespace whose init exits)."""
    started = time.monotonic()
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: d, tool: pipe.orphan_exit}\n"
    )
    assert out.end["status"] == "failed", out.end
    assert out.call("d")["error"]["class"] == "runner.runtime.worker.wire.WorkerGone"
    assert time.monotonic() - started < 60


def test_the_forked_worker_holds_nothing_of_the_run_and_no_descriptor_but_its_own(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The worker is a fork of the runtime: made before ``start``, it holds no copy
    of the run spec. A later step's argument, a secret only the runtime holds while the first
    step runs, is searched in the worker's whole writable memory (``/proc/self/mem``); the
    first step's own argument is the control the same scan must find. Its descriptors are
    stdio and its two pipe ends; it is dumpable again (its ``/proc`` is its own uid's, so the
    witness can read it) and in a session of its own."""
    secret, control = "SRMARK-" + uuid.uuid4().hex, "SRMARK-" + uuid.uuid4().hex
    digest = hashlib.sha256(secret.encode()).hexdigest()
    probe = "tool: worker.fork_probe, args: {{digest: {}, control: {}}}"
    steps = (
        f"- {{id: first, {probe.format(digest, control)}}}\n"
        f"- {{id: later, {probe.format(digest, secret)}}}\n"
    )
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    assert out.end["status"] == "succeeded", out.end
    first, later = (json.loads(out.call(step)["body"]) for step in ("first", "later"))
    assert first["control_found"] and not first["runtime_secret_found"], first
    assert later["control_found"] and later["runtime_secret_found"], later  # the scan works
    others = {fd: target for fd, target in first["fds"].items() if int(fd) > 2}
    assert len(others) == 2 and all(t.startswith("pipe:") for t in others.values()), first
    assert first["proc_owner"] == first["uid"] != 0, first
    assert first["own_session"] and first["parent"] == 1, first


def test_the_runtime_as_pid_1_enforces_the_cap_itself(
    backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """No host: the runtime waits for ``start`` that never comes; its own cap ends it (137)."""
    from runner.backends.base import LifetimeCap, SandboxSpec
    from runner.episode.prepare import RUNTIME_COMMAND, runner_mounts
    from runner.wire import protocol

    spec = SandboxSpec(
        run_id=f"selfcap-{uuid.uuid4().hex[:10]}",
        image=sandbox_image,
        command=RUNTIME_COMMAND,
        mounts=tuple(runner_mounts()),
        env={"PYTHONPATH": protocol.RUNTIME_ROOT},
        cap=LifetimeCap(2.0, grace_s=1.0),
        init=True,
    )
    with backend.sandbox(spec) as box:
        state = box.wait(60)  # the host would kill only after a minute
    assert not state.killed_by_host and state.exit_code == 137, state
    assert state.ran_s is not None and 2.5 < state.ran_s < 8, state


def _worker_by_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sandboxes started from here have ``SANDBOX_REPLAY_WORKER_START=exec``: their runtime
    (still PID 1) starts a fresh interpreter as its worker, the path off Linux."""
    from runner.backends.docker import backend as docker_backend
    from runner.backends.namespace import backend as namespace_backend

    for module in (docker_backend, namespace_backend):
        original = module.sandbox_environment
        monkeypatch.setattr(
            module,
            "sandbox_environment",
            lambda spec, original=original: {**original(spec), ENV_WORKER_START: "exec"},
        )


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_a_tools_own_fork_keeps_its_files_and_its_pools_work_witnessed(
    project: Project,
    backend: Any,
    sandbox_image: str,
    tmp_path: Path,
    start: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool that forks, or uses a ``multiprocessing`` pool (fork, spawn, forkserver), works
    in the worker as in a fresh interpreter: the fork's child keeps the tool's files (the
    first numbers a forked worker hands out are the runtime's closed channel copies, which no
    fork handler may close again: a fork pool's pipes got them and it hung), and every pool
    child's connect is the witness's (denied, in the outbound log, coverage full). Both ways
    of starting the worker: the fork, and the fresh interpreter
    (``SANDBOX_REPLAY_WORKER_START=exec``, the path off Linux)."""
    steps = (
        "- {id: own, tool: worker.own_fork}\n"
        "- {id: fork, tool: worker.pool, args: {method: fork, port: 7101}}\n"
        "- {id: spawn, tool: worker.pool, args: {method: spawn, port: 7201}}\n"
        "- {id: server, tool: worker.pool, args: {method: forkserver, port: 7301}}\n"
    )
    if start == "exec":
        _worker_by_exec(monkeypatch)
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    assert out.end["status"] == "succeeded", out.end
    own = out.body("own")
    assert own["lost"] == 0 and 3 in own["fds"], own
    for step in ("fork", "spawn", "server"):
        assert out.body(step) == {"map": [1, 2, 3], "connect": [101, 101]}, (step, out.body(step))
    denied = {
        (a["address"], a["port"]): a["outcome"]
        for a in out.end["outbound"]
        if a["kind"] == "connect"
    }
    for port in (7101, 7102, 7201, 7202, 7301, 7302):
        assert denied.get(("192.0.2.1", port)) == "denied", (port, out.end["outbound"])
    assert out.end["coverage"] == "full", out.end["coverage_detail"]


def test_the_workers_thawed_copy_of_the_runtime_channel_reaches_only_its_own_pipes(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The forked worker holds the runtime's objects (frozen out of gc, not out of reach):
    thawed, its ``Runtime``'s host channel sends a forged episode after the tool's own pipes
    took the free numbers. The write lands in those pipes (read back), never on the host's
    channel: the episode is the runtime's, and nothing crossed the worker's pipe unasked."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: t, tool: forge.via_thawed_runtime}\n"
    )
    assert out.end["status"] == "succeeded", out.end
    thawed = out.body("t")
    assert thawed["runtimes"] == 1 and thawed["sent"] == ["sent"], thawed  # the attack ran
    assert any('"FORGED"' in echo for echo in thawed["echo"]), thawed  # into its own pipe
    assert out.end["output"] == thawed and out.end["output"] != "FORGED", out.end


def test_the_worker_itself_cannot_read_trace_or_take_descriptors_of_pid_1(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The worker is a fork of PID 1 and dumpable again; PID 1 is not: from the worker itself
    (not a child of it), PID 1's /proc is root's and closed, ``ptrace`` is refused, and
    ``pidfd_getfd`` of its channel copies (3, 4) is refused. The control, a child of the
    worker, is listed, read and traced (``pidfd_getfd`` works on it where the engine's
    seccomp profile allows the call: the namespace backend)."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: p, tool: pid1.probe_from_worker}\n"
    )
    assert out.end["status"] == "succeeded", out.end
    probe = out.body("p")
    pid1, control = probe["pid1"], probe["control"]
    assert probe["me"] != 1 and probe["uid"] != 0, probe
    assert control["fd"].startswith("listed") and control["ptrace"] == "attached", control
    assert pid1["owner"] in (0, OVERFLOW_UID) and pid1["owner"] != probe["uid"], pid1
    assert pid1["fd"] == pid1["environ"] == pid1["mem"] == "EACCES", pid1
    assert pid1["ptrace"] == "EPERM", pid1
    assert probe["getfd"]["pid1"] == ["EPERM", "EPERM"], probe["getfd"]


def test_a_worker_a_tool_interrupts_ends_named_and_not_as_a_failed_start(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """A tool's ``SIGINT`` to its own worker (``KeyboardInterrupt`` in the main thread, as in
    a fresh interpreter) ends the worker: the call fails with `WorkerGone`, the runtime
    reports the episode, and the worker's last line says what ended it, not that it "failed
    to start" (it had started and run the tool)."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: i, tool: worker.interrupt_self}\n"
    )
    assert out.end["status"] == "failed", out.end
    assert out.call("i")["error"]["class"] == "runner.runtime.worker.wire.WorkerGone"
    stderr = stderr_of(out)
    assert "KeyboardInterrupt" in stderr and "failed to start" not in stderr, stderr


def test_a_worker_that_blinds_the_witness_is_still_denied_and_logged(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The forked worker is dumpable so that the witness can read its calls' addresses; tool
    code can make it not dumpable again. Its connect is then still trapped: answered
    ``ENETUNREACH`` and logged, without the address the witness could not read, and the
    log's coverage is ``partial`` for it (it stayed ``full``, a log that no
    longer names every destination tried); dumpable again, the next connect is logged with
    its address."""
    steps = "- {id: b, tool: worker.blind_witness, args: {port: 7401}}\n"
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    assert out.end["status"] == "succeeded", out.end
    assert out.body("b") == {"blinded": 101, "seen": 101}, out.body("b")
    connects = [a for a in out.end["outbound"] if a["kind"] == "connect"]
    ports = {a["port"]: a for a in connects}
    assert 7401 not in ports and ports[7402]["outcome"] == "denied", connects
    (blind,) = [a for a in connects if a["address"] is None]
    assert blind["outcome"] == "denied" and blind["event"] == "seccomp.connect", blind
    assert out.end["coverage"] == "partial", out.end["coverage_detail"]
    reasons = [d.get("reason", "") for d in out.end["coverage_detail"]]
    assert [r for r in reasons if "could not read where a call went" in r], reasons


def test_the_forked_worker_is_the_process_a_fresh_interpreter_was(
    project: Project,
    backend: Any,
    sandbox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Besides its memory, the fork is what the fresh ``python3 -m runner.runtime.worker``
    was (``SANDBOX_REPLAY_WORKER_START=exec``): the same environment (nothing of the
    runtime's own more), signal dispositions and mask (SIGINT raises again), limits, OOM
    score (1000: a hog takes the worker), umask, folder, dumpable flag, session, seccomp
    filters, stdio, threads and frozen clock, when the tool first runs."""
    step = "- {id: s, tool: worker.process_state}\n"
    found = {}
    for start in ("fork", "exec"):
        if start == "exec":
            _worker_by_exec(monkeypatch)
        out = run_steps(project, backend, sandbox_image, tmp_path / start, step)
        assert out.end["status"] == "succeeded", out.end
        found[start] = out.body("s")
    fork, fresh = found["fork"], found["exec"]
    assert fresh["environment"].pop(ENV_WORKER_START) == "exec", fresh
    assert fork.pop("forked") and not fresh.pop("forked"), (fork, fresh)  # two ways, truly
    assert fork["signals"]["SIGINT"] == "<built-in function default_int_handler>", fork
    assert fork["dumpable"] == 1 and fork["own_session"] and fork["oom_score_adj"] == "1000"
    for key in sorted(fresh):
        assert fork[key] == fresh[key], (key, fork[key], fresh[key])
