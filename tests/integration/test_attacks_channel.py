"""Hostile tool code against the channel, the registry and the grading (real containers).

Each test runs a real episode in a ``network_mode=none`` container through `run_episode`
(`tests/integration/_episodes.py`, which skips the load-time eligibility check on purpose: the
sandbox must hold on its own). The hostile tools are tests/fixtures/attacks/hostile_tools.py.
A test marked ``xfail(strict=True)`` is an open weakness: it asserts what the product claims and
fails today; the reason names the weak spot. The passing tests (and the controls next to the
xfails, which show the attack really reached its target) are the proof.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration._episodes import Project
from tests.integration._hostile import backend, backend_entry, project, run_steps, stderr_of

pytestmark = pytest.mark.docker
# what the runtime names when the worker writes a line it does not accept (runner/runtime/worker)
PROTOCOL_ERROR = "runner.runtime.worker.wire.WorkerProtocolError"
__all__ = ["backend", "backend_entry", "project"]  # fixtures


# --- forging and stealing protocol messages --------------------------------------------------


def test_forged_episode_on_the_private_fd_is_not_believed(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The tool runs in the worker, which holds no descriptor of the channel (PID 1's /proc/1/fd
    is root's: the runtime is not dumpable): the only pipe it finds is its own to the runtime."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: f, tool: forge.private_fd}\n"
    )
    assert out.end["output"] != "FORGED", out.end
    assert out.end["status"] == "failed", out.end


def test_forging_tool_reached_only_the_worker_pipe_and_is_named(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """Control for the test above: the forged line was written (to the worker's pipe), was not
    believed, and the episode names it."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: f, tool: forge.private_fd}\n"
    )
    assert out.end["failure"]["error_class"] == "runner.runtime.worker.wire.WorkerProtocolError", (
        out.end
    )
    assert "'episode' line that answers nothing" in out.end["error"]["message"], out.end
    assert [c["tool"] for c in out.calls] == ["forge.private_fd"]
    assert out.calls[0]["error"]["class"] == PROTOCOL_ERROR


def test_child_process_cannot_speak_the_protocol_through_proc_1_fd(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: c, tool: forge.child_takeover}\n",
        model="attack_model:respond",
        timeout_s=30,
    )
    assert out.end["meter"]["model_calls"] == 0, out.end  # the workflow makes no model call
    assert not str(out.end["output"]).startswith("CHILD:"), out.end
    assert out.end["status"] == "failed", out.end


def test_child_takeover_reached_only_the_worker_pipe_and_is_named(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """Control for the test above: the child ran (it stopped its parent, the worker, and wrote
    its model request on the only channel-like pipe it found: the worker's); the runtime did
    not believe it and the episode names it."""
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: c, tool: forge.child_takeover}\n",
        model="attack_model:respond",
        timeout_s=30,
    )
    assert out.end["status"] == "failed", out.end
    assert out.end["failure"]["error_class"] == "runner.runtime.worker.wire.WorkerProtocolError", (
        out.end
    )
    assert "'model_request' line that answers nothing" in out.end["error"]["message"]
    assert out.end["meter"]["model_calls"] == 0


def test_forged_episode_through_the_channel_object_is_not_believed(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The only Channel in the worker is its pipe to the runtime: the forged episode sent through
    it is not believed, and named."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: g, tool: forge.via_gc_channel}\n"
    )
    assert out.end["output"] != "FORGED", out.end
    assert out.end["failure"]["error_class"] == "runner.runtime.worker.wire.WorkerProtocolError", (
        out.end
    )


# --- escaping the tool registry ----------------------------------------------------------------


def test_denied_tool_through_tooldef_func_is_denied(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """In the worker a denied tool's code is never bound: ToolDef.func is a stub that denies."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: e, tool: escape.tooldef_func}\n"
    )
    assert "UNSAFE CODE RAN" not in stderr_of(out)
    assert all("LAUNCHED" not in str(c.get("body")) for c in out.calls), out.calls
    assert out.calls[0]["error"]["class"] == "runner.errors.CapabilityDenied", out.calls
    assert out.end["status"] == "denied", out.end


def test_denied_tool_through_the_wrappers_closure_is_denied(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The wrapper's closure cell holds the same denying stub, not the bare function."""
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: e, tool: escape.closure}\n")
    assert "UNSAFE CODE RAN" not in stderr_of(out)
    assert all("LAUNCHED" not in str(c.get("body")) for c in out.calls), out.calls
    assert out.end["status"] == "denied", out.end


def test_denied_tool_after_patching_the_guard_is_denied(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """Patching the worker's guard changes nothing: the code it would reach is the stub."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: e, tool: escape.reset_context}\n"
    )
    assert "UNSAFE CODE RAN" not in stderr_of(out)
    assert all("LAUNCHED" not in str(c.get("body")) for c in out.calls), out.calls
    assert out.end["status"] == "denied", out.end


def test_denied_tool_injected_into_the_runtime_registry_stays_unresolvable(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(
        project,
        backend,
        sandbox_image,
        tmp_path,
        "- {id: inject, tool: escape.inject_registry}\n- {id: launch, tool: world.launch}\n",
    )
    assert out.body("inject") == 0  # the registry is the runtime's: none in the worker
    assert [c["tool"] for c in out.calls] == ["escape.inject_registry"]  # launch never ran
    assert out.end["status"] == "denied", out.end


def test_denied_tool_called_from_a_python_child_is_denied(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """A process started from the worker binds no tool code (runner.sdk.dispatch.ENV_WITHHOLD)."""
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: c, tool: escape.child_process}\n"
    )
    assert "LAUNCHED" not in out.body("c") and "CapabilityDenied" in out.body("c"), out.body("c")


def test_denied_tool_from_a_thread_a_fresh_context_or_a_reimport_is_denied(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    steps = """
    - {id: thread, tool: contained.thread}
    - {id: ctx, tool: contained.empty_context}
    - {id: reimport, tool: contained.reimport}
    """
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    assert out.end["status"] == "succeeded", out.end
    for step in ("thread", "ctx", "reimport"):
        assert out.body(step).startswith("CapabilityDenied"), (step, out.body(step))
    # nothing of the unsafe tool ran (stderr_tail is only kept for a non-success; use a
    # failing last step to see it)
    assert all("LAUNCHED" not in str(c.get("body")) for c in out.calls)


# --- grading integrity and the outbound log ---------------------------------------------------


def test_the_answer_key_is_not_inside_the_sandbox(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    from runner.domain.ids import sequential_ids
    from runner.domain.tasks import Task
    from runner.domain.workflow import load_workflow
    from runner.episode.driver import run_episode
    from runner.episode.request import EpisodeRequest
    from runner.policy import load_policy
    from runner.settings import Settings
    from runner.tools.snapshot.sources import project_snapshot
    from runner.tools.source import registry_for_workflow

    wf = load_workflow(project.workflow("- {id: c, tool: cheat.read_expected}\n"))
    policy = load_policy("shadow")
    task = Task(task_id="t1", input={}, expected={"output_contains": "SECRET-ANSWER-42"})
    state = tmp_path / "state"
    request = EpisodeRequest(
        workflow=wf,
        task=task,
        policy=policy,
        registry=registry_for_workflow(wf).restrict(policy),
        image=sandbox_image,
        snapshot=project_snapshot([wf], state_dir=state),
    )
    result = run_episode(
        request,
        backend=backend,
        settings=Settings(state_dir=state),
        provider=None,
        id_factory=sequential_ids("cheat"),
    )
    assert result.status == "succeeded", result.end
    assert "SECRET-ANSWER-42" not in json.dumps(result.end["output"])


def test_egress_cannot_be_hidden_in_process(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """Tool code clears the worker's audit hook: the egress witness, outside the worker, still
    logs its connect, and the coverage stays ``full``."""
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: h, tool: hide.in_process}\n")
    hidden = [a for a in out.end["outbound"] if a.get("address") == "203.0.113.77"]
    assert [(a["port"], a["event"]) for a in hidden] == [(4444, "seccomp.connect")], out.end
    assert out.end["coverage"] == "full", out.end["coverage_detail"]


def test_egress_of_a_child_cannot_be_hidden_by_truncating_its_log(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: h, tool: hide.child_log}\n")
    logged = {a.get("address"): a for a in out.end["outbound"]}
    assert "203.0.113.78" in logged, out.end  # the witness saw it, whatever the child's log says
    assert logged["203.0.113.78"]["event"].startswith("seccomp."), logged


def test_escape_sequences_from_tool_code_never_reach_the_terminal(
    project: Project,
    backend: Any,
    sandbox_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from runner.cli.render.episode import print_episode

    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: t, tool: term.inject}\n")
    assert out.end["status"] == "failed", out.end
    capsys.readouterr()
    print_episode(out.result)
    printed = capsys.readouterr().out
    assert "PWNED" in printed  # the hostile text is shown ...
    assert "\x1b" not in printed and "\x07" not in printed, repr(printed)  # ... but inert


def test_a_sandbox_that_stops_reading_cannot_hang_the_host(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, docker_client: Any
) -> None:
    limit = 6.0
    done: dict[str, Any] = {}
    workflow = project.workflow("- {id: h, tool: hang.host}\n", model="attack_model:respond")

    def run() -> None:
        out = project.run(
            backend, sandbox_image, workflow, state_dir=tmp_path / "state", timeout_s=limit
        )
        done["status"] = out.end["status"]

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit + 45)
    hung = thread.is_alive()
    if hung:  # unblock the host: removing our container closes the socket it writes to
        _remove_our_containers(docker_client, backend)
        thread.join(30)
    assert not hung, "the host was still blocked well past the run's deadline"
    assert done.get("status") == "timeout", done


def _remove_our_containers(docker_client: Any, backend: Any) -> None:
    from runner.backends.labels import SESSION

    for container in docker_client.containers.list(
        all=True, filters={"label": f"{SESSION}={backend.session_id}"}
    ):
        container.remove(force=True)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_host_memory_stays_bounded_while_a_sandbox_floods_a_blocked_host(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, docker_client: Any
) -> None:
    workflow = project.workflow(
        "- {id: h, tool: hang.host_then_flood}\n", model="attack_model:respond"
    )
    before = _rss_mb()
    thread = threading.Thread(
        target=lambda: project.run(
            backend, sandbox_image, workflow, state_dir=tmp_path / "state", timeout_s=6.0
        ),
        daemon=True,
    )
    thread.start()
    peak = before
    for _ in range(40):  # 20 s: enough for the 600 MB to arrive, unless the run ended first
        ended = not thread.is_alive()  # then its reader is gone: nothing more can arrive
        time.sleep(0.5)
        peak = max(peak, _rss_mb())
        if ended:
            break
    _remove_our_containers(docker_client, backend)
    thread.join(30)
    assert peak - before < 300, f"host RSS grew {peak - before:.0f} MB"
