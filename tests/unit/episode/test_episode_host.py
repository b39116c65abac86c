"""The episode driver and status classification, against a local-subprocess fake backend.

The "runtime" here is a small script speaking the protocol (tests/support/fakes.py runs it as a
local process: not a sandbox). Real containers are in tests/integration/test_episode.py.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.domain.ids import sequential_ids
from runner.domain.tasks import Task
from runner.domain.workflow import load_workflow
from runner.episode.driver import run_episode
from runner.episode.request import EpisodeRequest
from runner.providers.scripted import ScriptedProvider
from runner.settings import Settings
from runner.tools.snapshot.toolsnapshot import SnapshotEntry, build_snapshot
from runner.trace.format import failure_signature
from tests.support.fakes import SubprocessBackend
from tests.support.paths import REPO

SCHEMA_VALIDATOR = pytest.importorskip("jsonschema").Draft202012Validator(
    json.loads((REPO / "docs" / "trace.schema.json").read_text())
)

FAKE_RUNTIME = textwrap.dedent(
    r"""
    import json, os, sys, time, signal
    mode = sys.argv[1]
    out = sys.stdout.buffer
    def send(msg):
        out.write(json.dumps(msg).encode() + b"\n"); out.flush()
    def recv():
        line = sys.stdin.buffer.readline()
        return json.loads(line) if line else None
    if mode == "exit_now":
        sys.stderr.write("boom: no python here\n"); sys.exit(3)
    if mode == "silent":
        time.sleep(60)
    send({"type": "hello", "protocol": 2 if mode == "bad_protocol" else 1,
          "python": "3.11.2", "platform": "linux", "pid": os.getpid(), "packages": {"x": "1"}})
    start = recv()
    assert start["type"] == "start" and start["protocol"] == 1, start
    assert start["run"]["task"]["task_id"] == "t1" and "tools" in start["manifest"], start
    send({"type": "step", "step_id": "fetch", "state": "started"})
    send({"type": "egress", "attempt": {"kind": "connect", "host": None, "address": "10.9.9.9",
          "port": 80, "resolved_from": None, "outcome": "attempted", "pid": 5}})
    send({"type": "call", "record": {"index": 0, "step_id": "fetch", "tool": "kb.search",
          "args": {"q": "\udcff"}, "body": "caf\u00e9 \ud83c\udf89", "body_encoding": "text"}})
    if mode == "sigkill":
        sys.stderr.write("dying\n"); sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
    if mode == "flood":
        while True:
            send({"type": "meter", "tokens_in": 0, "tokens_out": 0, "pad": "x" * 1000})
    if mode == "stops_reading":  # asks for model turns and never reads the replies
        for i in range(5000):
            send({"type": "model_request", "id": "m%d" % i, "role": "model",
                  "request": {"model": "x", "messages": [{"role": "user", "content": "hi"}]}})
        time.sleep(60)
    if mode in ("manifest", "manifest_then_requests"):  # tool code on the private fd
        send({"type": "manifest", "modules": []})
        for i in range(50 if mode == "manifest_then_requests" else 0):
            send({"type": "model_request", "id": "k%d" % i, "role": "model",
                  "request": {"model": "x", "messages": [{"role": "user", "content": "hi"}]}})
            time.sleep(0.01)
        time.sleep(60)
    if mode == "runtime_error":
        send({"type": "error", "class": "ImportError", "message": "no module x"})
        recv(); sys.exit(1)
    send({"type": "step", "step_id": "fetch", "state": "finished"})
    send({"type": "step", "step_id": "answer", "state": "started"})
    send({"type": "model_request", "id": "m1", "role": "model",
          "request": {"model": "x", "messages": [{"role": "user", "content": "hi"}]}})
    resp = recv()
    send({"type": "call", "record": {"index": 1, "step_id": "answer", "tool": "model",
          "request": {}, "body": "forged", "body_encoding": "text", "model": "forged"}})
    sys.stdout.flush()
    sys.stderr.write("noise\n")
    if mode == "failed":
        send({"type": "episode", "status": "failed", "output": None,
              "error": {"class": "KeyError", "message": "'x'"}, "not_run": ["notify"],
              "failure": {"call_index": 1, "tool": "model", "error_class": "KeyError"}})
    else:
        send({"type": "episode", "status": "succeeded", "output": resp["body"], "error": None,
              "not_run": []})
    msg = recv()
    assert msg == {"type": "shutdown"}, msg
    sys.exit(0)
    """
)

WORKFLOW = """\
name: demo
version: "1"
tools: [demo_tools]
model: {provider: scripted, function: "m:f"}
steps:
  - id: fetch
    tool: kb.search
    args: {q: "${task.q}"}
  - id: answer
    agent: {tools: [kb.search], max_turns: 2}
  - id: notify
    tool: kb.search
    args: {q: x}
"""


class FakeRegistry:
    def __init__(self, root: Path) -> None:
        self.root = root

    def manifest(self, policy: Any) -> dict[str, Any]:
        return {
            "policy": {"name": "shadow", "mode": "shadow", "hash": "p-hash"},
            "tools": [
                {
                    "id": "kb.search",
                    "effect": "read",
                    "schema_hash": "s-hash",
                    "module": "demo_tools",
                    "qualname": "search",
                    "disposition": "recorded",
                }
            ],
        }

    def tool_roots(self) -> list[Path]:
        return [self.root]


def _model(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "scripted-7",
        "choices": [{"message": {"role": "assistant", "content": "héllo"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


@pytest.fixture
def setup(tmp_path: Path) -> SimpleNamespace:
    wf_path = tmp_path / "wf.yaml"
    wf_path.write_text(WORKFLOW)
    script = tmp_path / "fake_runtime.py"
    script.write_text(FAKE_RUNTIME)
    (tmp_path / "demo_tools.py").write_text("x = 1\n")
    snapshot = build_snapshot(
        [SnapshotEntry(tmp_path.resolve(), "demo_tools.py")], state_dir=tmp_path / "state"
    )
    policy = SimpleNamespace(
        name="shadow",
        mode="shadow",
        hash="p-hash",
        prices={"scripted-*": {"input_usd_per_mtok": 1000.0, "output_usd_per_mtok": 2000.0}},
        limits=SimpleNamespace(timeout_s=20, memory_mb=256, pids_limit=64, cpus=1.0, tmpfs_mb=16),
    )
    request = EpisodeRequest(
        workflow=load_workflow(wf_path),
        task=Task(task_id="t1", input={"q": "hi"}, clock_start=100.0),
        policy=policy,
        registry=FakeRegistry(tmp_path),
        image="img:1",
        snapshot=snapshot,
    )
    return SimpleNamespace(
        tmp=tmp_path,
        script=script,
        request=request,
        settings=Settings(state_dir=tmp_path / "state"),
    )


def _run(setup: SimpleNamespace, mode: str, **kw: Any) -> Any:
    backend = SubprocessBackend(
        [sys.executable, "-u", str(setup.script), mode],
        oom=kw.pop("oom", False),
        fail_start=kw.pop("fail_start", False),
        fail_teardown=kw.pop("fail_teardown", False),
    )
    settings = kw.pop("settings", setup.settings)
    result = run_episode(
        setup.request,
        backend=backend,
        settings=settings,
        provider=ScriptedProvider(_model),
        id_factory=sequential_ids(),
        **kw,
    )
    lines = [json.loads(x) for x in result.trace_path.read_text().splitlines()]
    for line in lines:  # every status's trace obeys the published schema
        errors = [e.message for e in SCHEMA_VALIDATOR.iter_errors(line)]
        assert not errors, (line["type"], errors)
    return result, lines, backend


def test_succeeded_episode_trace_and_spec(setup: SimpleNamespace) -> None:
    result, lines, backend = _run(setup, "succeeded")
    assert result.status == "succeeded"
    assert [line["type"] for line in lines] == ["run", "call", "call", "end"]
    assert all(line["v"] == 1 for line in lines)
    head = lines[0]
    assert head["task_input"] == {"q": "hi"} and head["purpose"] == "replay"
    assert head["workflow"]["content"] == WORKFLOW and len(head["workflow"]["hash"]) == 64
    assert head["clock"] == {"start": 100.0, "step_s": 1.0} and head["seed"] == 0
    env = head["environment"]
    assert env["python"] == "3.11.2" and env["packages"] == {"x": "1"}
    assert env["tools"] == {"kb.search": "s-hash"} and env["policy_hash"] == "p-hash"
    assert head["backend"] == "subprocess-fake"
    # the sandbox's own name (a container's, a namespace sandbox's id), not only in the log
    assert head["sandbox"] == backend.sandboxes[0].name == "fake-" + result.run_id
    # a lone surrogate in args survives; the body is valid text
    assert lines[1]["args"] == {"q": "\udcff"} and lines[1]["body"] == "café 🎉"
    assert lines[2]["model"] == "scripted-7"
    assert json.loads(lines[2]["body"])["model"] == "scripted-7"
    end = lines[-1]
    assert end["exit_code"] == 0 and end["failure_signature"] is None
    assert end["meter"]["tokens_in"] == 3 and end["meter"]["tokens_out"] == 2
    assert end["meter"]["usd"] == pytest.approx((3 * 1000 + 2 * 2000) / 1e6)
    assert "meta" not in end
    assert end["outbound"][0]["address"] == "10.9.9.9" and end["coverage"] == "full"
    assert end["not_run"] == []
    spec = backend.specs[0]
    assert spec.command == ("python3", "-u", "-m", "runner.runtime")
    # the tool root (which holds the state folder and the workflow here) is never mounted: its
    # declared module is, from the command's snapshot
    assert {m.target for m in spec.mounts} == {
        "/opt/sandbox-replay/runner/__init__.py",
        "/opt/sandbox-replay/runner/errors",
        "/opt/sandbox-replay/runner/trace",
        "/opt/sandbox-replay/runner/sdk",
        "/opt/sandbox-replay/runner/wire",
        "/opt/sandbox-replay/runner/runtime",
        "/sandbox/tools/0",
    }
    tools = next(m for m in spec.mounts if m.target == "/sandbox/tools/0")
    assert tools.source == setup.request.snapshot.path / "0"
    assert sorted(p.name for p in tools.source.iterdir()) == ["demo_tools.py"]
    assert all(m.read_only for m in spec.mounts)
    assert head["environment"]["tool_snapshot"] == setup.request.snapshot.digest
    assert spec.env["TZ"] == "UTC" and spec.env["PYTHONHASHSEED"] == "0"
    assert spec.env["PYTHONUNBUFFERED"] == "1" and spec.env["PYTHONPATH"] == "/opt/sandbox-replay"
    assert spec.limits.timeout_s == 20 and spec.limits.memory_mb == 256
    # nothing of the run is mounted: it travels in ``start``
    assert not (setup.settings.state_dir / "runs").exists()
    start = json.loads(bytes(backend.sandboxes[-1].written).split(b"\n")[0])
    assert start["type"] == "start" and start["protocol"] == 1
    run_json = start["run"]
    assert run_json["tool_paths"] == ["/sandbox/tools/0"] and run_json["task"]["task_id"] == "t1"
    assert start["manifest"]["policy"]["hash"] == "p-hash"


def test_settings_override_policy_limits(setup: SimpleNamespace) -> None:
    settings = Settings(state_dir=setup.tmp / "s2", memory_mb=128, timeout_s=9)
    _, _, backend = _run(setup, "succeeded", settings=settings)
    assert backend.specs[0].limits.memory_mb == 128 and backend.specs[0].limits.timeout_s == 9
    assert backend.specs[0].limits.pids_limit == 64


def test_failed_episode_has_signature(setup: SimpleNamespace) -> None:
    result, lines, _ = _run(setup, "failed")
    end = lines[-1]
    assert result.status == "failed" and end["exit_code"] == 1
    assert end["failure"] == {
        "call_index": 1,
        "tool": "model",
        "error_class": "KeyError",
        "exit_code": 1,
    }
    assert end["failure_signature"] == failure_signature(1, "model", "KeyError", 1)
    assert end["not_run"] == ["notify"]


def test_exits_at_once_is_crashed_with_stderr(setup: SimpleNamespace) -> None:
    result, lines, _ = _run(setup, "exit_now")
    end = lines[-1]
    assert result.status == "crashed" and end["exit_code"] == 125
    assert end["sandbox"]["exit_code"] == 3
    assert end["stderr_tail"] == ["boom: no python here"]
    assert end["not_run"] == ["fetch", "answer", "notify"]
    assert lines[0]["type"] == "run" and lines[0]["environment"]["python"] is None


def test_sigkill_from_inside_is_crashed(setup: SimpleNamespace) -> None:
    result, lines, _ = _run(setup, "sigkill")
    end = lines[-1]
    assert result.status == "crashed" and end["sandbox"]["exit_code"] == 137
    assert end["sandbox"]["killed_by_host"] is False
    assert "dying" in end["stderr_tail"]
    assert end["not_run"] == ["answer", "notify"]
    assert end["failure"]["call_index"] == 0 and end["failure"]["tool"] == "workflow"


def test_hang_is_timeout(setup: SimpleNamespace) -> None:
    settings = Settings(state_dir=setup.tmp / "s3", timeout_s=1.0)
    result, lines, backend = _run(setup, "hang", settings=settings)
    assert result.status == "timeout" and lines[-1]["exit_code"] == 124
    assert backend.sandboxes[0].proc.poll() is not None
    assert lines[-1]["meter"]["sandbox_s"] < 5


def test_a_runtime_that_stops_reading_cannot_hold_the_host_past_the_deadline(
    setup: SimpleNamespace,
) -> None:
    import time

    settings = Settings(state_dir=setup.tmp / "s6", timeout_s=1.5)
    started = time.monotonic()
    result, lines, backend = _run(setup, "stops_reading", settings=settings)
    assert time.monotonic() - started < 10
    assert result.status == "timeout" and lines[-1]["sandbox"]["killed_for"] == "timeout"
    assert backend.sandboxes[0].proc.poll() is not None
    # the host really was blocked: its replies filled the pipe (64 KiB) the runtime never read
    assert len(backend.sandboxes[0].written) > 60_000


def test_oom_flag_wins(setup: SimpleNamespace) -> None:
    result, _, _ = _run(setup, "sigkill", oom=True)
    assert result.status == "oom" and result.end["exit_code"] == 137


def test_no_hello_is_infra_error_within_deadline(setup: SimpleNamespace) -> None:
    result, lines, _ = _run(setup, "silent", hello_timeout_s=0.5)
    assert result.status == "infra_error" and "never said hello" in lines[-1]["reason"]
    assert lines[-1]["meter"]["sandbox_s"] < 5


def test_protocol_mismatch_and_runtime_error(setup: SimpleNamespace) -> None:
    result, lines, _ = _run(setup, "bad_protocol")
    assert result.status == "infra_error" and "protocol 2" in lines[-1]["reason"]
    result, lines, _ = _run(setup, "runtime_error", settings=Settings(state_dir=setup.tmp / "s4"))
    assert result.status == "infra_error" and "ImportError" in lines[-1]["reason"]


def test_start_failure_is_infra_error_with_trace(setup: SimpleNamespace) -> None:
    result, lines, _ = _run(setup, "succeeded", fail_start=True)
    assert result.status == "infra_error" and result.infrastructure_failed
    assert [line["type"] for line in lines] == ["run", "end"]
    assert "fake engine refused" in lines[-1]["reason"]


def test_ctrl_c_still_ends_the_trace_and_stops_the_process(setup: SimpleNamespace) -> None:
    def interrupt(request: dict[str, Any]) -> dict[str, Any]:
        raise KeyboardInterrupt

    backend = SubprocessBackend([sys.executable, "-u", str(setup.script), "succeeded"])
    provider = ScriptedProvider(_model)
    provider.function = interrupt
    with pytest.raises(KeyboardInterrupt):
        run_episode(
            setup.request,
            backend=backend,
            settings=setup.settings,
            provider=provider,
            id_factory=sequential_ids(),
        )
    trace = setup.settings.state_dir.resolve() / "traces" / "run-0001.jsonl"
    end = json.loads(trace.read_text().splitlines()[-1])
    assert end["type"] == "end" and end["status"] == "infra_error"
    assert "interrupted" in end["reason"]
    assert backend.sandboxes[0].proc.poll() is not None


def test_hanging_model_function_cannot_outlive_the_deadline(setup: SimpleNamespace) -> None:
    import threading
    import time

    release = threading.Event()
    backend = SubprocessBackend([sys.executable, "-u", str(setup.script), "succeeded"])
    provider = ScriptedProvider(lambda r: release.wait(30) and _model(r))
    started = time.monotonic()
    result = run_episode(
        setup.request,
        backend=backend,
        settings=Settings(state_dir=setup.tmp / "s5", timeout_s=1.5),
        provider=provider,
        id_factory=sequential_ids(),
    )
    release.set()
    assert result.status == "timeout" and time.monotonic() - started < 10


def test_unpriced_model_is_named_not_silently_free(setup: SimpleNamespace) -> None:
    setup.request.policy.prices = {
        "gpt-4.1*": {"input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0}
    }
    _, lines, _ = _run(setup, "succeeded")
    assert lines[-1]["meter"]["usd"] == 0.0
    assert lines[-1]["meta"] == {"unpriced_models": ["scripted-7"]}


def test_removal_failure_after_the_end_keeps_the_status(setup: SimpleNamespace) -> None:
    result, lines, _ = _run(setup, "succeeded", fail_teardown=True)
    assert result.status == "succeeded"
    assert "could not remove" in lines[-1]["sandbox"]["teardown_error"]


def test_output_over_the_total_cap_is_killed_and_recorded(setup: SimpleNamespace) -> None:
    from runner.episode.channel import Channel

    result, lines, backend = _run(
        setup, "flood", channel_factory=lambda: Channel(max_total_bytes=200_000)
    )
    end = lines[-1]
    assert result.status == "failed" and "total-output cap" in end["reason"]
    assert end["channel"]["truncated"] is True and end["channel"]["stdout_bytes"] == 200_000
    assert end["sandbox"]["killed_for"] == "output_limit"
    assert backend.sandboxes[0].proc.poll() is not None


def test_unhandled_protocol_message_is_a_protocol_error_with_a_complete_trace(
    setup: SimpleNamespace,
) -> None:
    result, lines, backend = _run(setup, "manifest")
    end = lines[-1]
    assert end["type"] == "end" and result.status == "infra_error"
    assert "protocol error" in end["reason"] and "'manifest'" in end["reason"]
    assert end["sandbox"]["killed_for"] == "protocol_error"
    assert backend.sandboxes[0].proc.poll() is not None


def test_model_requests_buffered_by_a_killed_sandbox_never_reach_the_provider(
    setup: SimpleNamespace,
) -> None:
    calls: list[dict[str, Any]] = []

    def counting(request: dict[str, Any]) -> dict[str, Any]:
        calls.append(request)
        return _model(request)

    backend = SubprocessBackend([sys.executable, "-u", str(setup.script), "manifest_then_requests"])
    result = run_episode(
        setup.request,
        backend=backend,
        settings=setup.settings,
        provider=ScriptedProvider(counting),
        id_factory=sequential_ids(),
    )
    end = json.loads(result.trace_path.read_text().splitlines()[-1])
    assert end["sandbox"]["killed_for"] == "protocol_error"
    assert calls == [] and end["meter"]["model_calls"] == 0 and end["meter"]["usd"] == 0.0
