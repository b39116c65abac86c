"""The runtime's channel: hello/start/shutdown/EOF, stdio isolation, runtime errors, Python 3.9.

The runtime runs as a local subprocess with a temporary RUN_DIR; a tiny host in the test speaks
the protocol over pipes (tests/fixtures/runtime/fakehost.py). No Docker.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import (
    PY39,
    completion,
    manifest_for,
    read_message,
    run_runtime,
    scripted,
    send,
    spawn,
    write_run_dir,
)

PURE_WF = {
    "name": "w",
    "version": "1",
    "model": None,
    "steps": [{"id": "add", "tool": "math.add", "args": {"a": 1, "b": 2}}],
}


def _run_dir(tmp_path: Path, workflow: dict = PURE_WF, dispositions: dict | None = None) -> Path:
    return write_run_dir(
        tmp_path / "run",
        workflow,
        {"task_id": "t", "input": {}},
        manifest_for(dispositions or {"math.add": "execute"}),
    )


def test_hello_first_then_waits_for_start(tmp_path: Path) -> None:
    proc = spawn(_run_dir(tmp_path), tmp_path)
    try:
        hello = read_message(proc)
        assert hello is not None and hello["type"] == "hello"
        assert hello["protocol"] == 1 and hello["pid"] > 0
        assert hello["python"] == ".".join(map(str, sys.version_info[:3]))
        assert isinstance(hello["packages"], dict) and hello["platform"].startswith("linux")
        time.sleep(0.3)
        assert proc.poll() is None, "the runtime must wait for start"
        send(proc, {"type": "start", "protocol": 1})
        kinds = []
        while (message := read_message(proc)) is not None:
            kinds.append(message["type"])
        assert kinds[-1] == "episode" and "call" in kinds
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_shutdown_before_start_exits_at_once(tmp_path: Path) -> None:
    proc = spawn(_run_dir(tmp_path), tmp_path)
    try:
        assert read_message(proc)["type"] == "hello"  # type: ignore[index]
        started = time.monotonic()
        send(proc, {"type": "shutdown"})
        assert proc.wait(5) == 0
        assert time.monotonic() - started < 2
        assert read_message(proc) is None
    finally:
        proc.kill()
        proc.wait()


def test_shutdown_while_waiting_for_a_model_turn(tmp_path: Path) -> None:
    workflow = {
        "name": "w",
        "version": "1",
        "model": {"provider": "scripted"},
        "steps": [{"id": "a", "agent": {"tools": [], "max_turns": 2}}],
    }
    proc = spawn(_run_dir(tmp_path, workflow), tmp_path)
    try:
        assert read_message(proc)["type"] == "hello"  # type: ignore[index]
        send(proc, {"type": "start", "protocol": 1})
        while (message := read_message(proc)) is not None and message["type"] != "model_request":
            pass
        assert message is not None and message["type"] == "model_request"
        send(proc, {"type": "shutdown"})  # stdin stays open: shutdown must not need EOF
        assert proc.wait(5) == 0
    finally:
        proc.kill()
        proc.wait()


def test_eof_on_stdin_ends_the_runtime(tmp_path: Path) -> None:
    proc = spawn(_run_dir(tmp_path), tmp_path)
    try:
        assert read_message(proc)["type"] == "hello"  # type: ignore[index]
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(5) == 0
        assert read_message(proc) is None
    finally:
        proc.kill()
        proc.wait()


def test_print_from_a_tool_never_reaches_the_channel(tmp_path: Path) -> None:
    workflow = {
        "name": "w",
        "version": "1",
        "model": None,
        "steps": [{"id": "p", "tool": "misc.print", "args": {}}],
    }
    result = run_runtime(_run_dir(tmp_path, workflow, {"misc.print": "execute"}), tmp_path)
    assert result.returncode == 0
    assert [m["type"] for m in result.messages].count("episode") == 1
    assert result.episode["output"] == "printed"
    assert all(m.get("output") != "FORGED" for m in result.messages)
    # all three writes (print, sys.stdout.write, os.write(1)) went to stderr instead
    assert result.stderr.count('"output":"FORGED"') == 3


def test_a_tool_reading_stdin_gets_end_of_file(tmp_path: Path) -> None:
    workflow = {
        "name": "w",
        "version": "1",
        "model": None,
        "steps": [{"id": "s", "tool": "misc.stdin", "args": {}}],
    }
    proc = spawn(_run_dir(tmp_path, workflow, {"misc.stdin": "execute"}), tmp_path)
    try:
        assert read_message(proc)["type"] == "hello"  # type: ignore[index]
        send(proc, {"type": "start", "protocol": 1})
        # bait: a line the tool would see if it could read the channel
        send(proc, {"type": "model_response", "id": "bait", "body": "SECRET"})
        messages = []
        while (message := read_message(proc)) is not None:
            messages.append(message)
        episode = messages[-1]
        assert episode["type"] == "episode" and episode["status"] == "succeeded"
        assert episode["output"] == {"sys": "", "fd0": ""}
        assert proc.wait(5) == 0
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("start", "field"),
    [
        ({"type": "start", "protocol": 1}, "run"),
        ({"type": "start", "protocol": 1, "run": "{not json"}, "run"),
        ({"type": "start", "protocol": 1, "run": {"mode": "shadow"}}, "run.workflow"),
        (
            {"type": "start", "protocol": 1, "run": {"mode": "x", "workflow": {}, "task": {}}},
            "run.mode",
        ),
    ],
)
def test_a_broken_start_is_an_error_message_and_exit_70(
    tmp_path: Path, start: dict, field: str
) -> None:
    # the run travels in ``start``, checked as strictly as run.json was
    proc = spawn(_run_dir(tmp_path), tmp_path)
    try:
        assert read_message(proc)["type"] == "hello"
        proc.run_dir = None  # type: ignore[attr-defined]  # send ``start`` as given
        send(proc, start)
        messages = [m for m in iter(lambda: read_message(proc), None)]
        assert proc.wait(30) == 70
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    errors = [m for m in messages if m["type"] == "error"]
    assert len(errors) == 1 and errors[0]["class"] == "runner.errors.InputError", messages
    assert "start message" in errors[0]["message"] and field in errors[0]["message"]
    assert not any(m["type"] == "episode" for m in messages)


def test_a_start_line_over_the_bound_is_discarded_unread(tmp_path: Path) -> None:
    # the start line is size-bounded (protocol.MAX_START_BYTES): a longer one is never parsed
    from runner.wire import protocol

    proc = spawn(_run_dir(tmp_path), tmp_path)
    try:
        assert read_message(proc)["type"] == "hello"
        assert proc.stdin is not None
        proc.stdin.write(b'{"type":"start","pad":"' + b"x" * (protocol.MAX_START_BYTES + 10))
        proc.stdin.write(b'"}\n')
        proc.stdin.flush()
        send(proc, {"type": "start", "protocol": 1})  # the real one, after the discarded line
        messages = [m for m in iter(lambda: read_message(proc), None)]
        assert proc.wait(30) == 0, messages
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [m["type"] for m in messages].count("episode") == 1


def test_code_that_differs_from_the_manifest_refuses_to_start(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["tools"][0]["schema_hash"] = "f" * 64
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    result = run_runtime(run_dir, tmp_path)
    assert result.returncode == 70
    message = result.of("error")[0]["message"]
    assert "math.add" in message and "f" * 64 in message and result.of("call") == []


@pytest.mark.skipif(not os.path.exists(PY39), reason="no Python 3.9 interpreter here")
def test_key_paths_run_on_python_3_9(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_EGRESS_WITNESS", "off")  # the hook's child log path
    workflow = {
        "name": "w",
        "version": "1",
        "model": {"provider": "scripted"},
        "steps": [
            {"id": "add", "tool": "math.add", "args": {"a": 1, "b": 2}},
            {"id": "p", "tool": "misc.print", "args": {}},
            {"id": "child", "tool": "net.child", "args": {"port": 9}},
            {"id": "true", "tool": "proc.true", "args": {}},
            {"id": "agent", "agent": {"tools": ["kb.search", "text.upper"], "max_turns": 3}},
            {"id": "deny", "tool": "misc.direct_unsafe", "args": {}},
        ],
    }
    dispositions = {
        "math.add": "execute",
        "misc.print": "execute",
        "net.child": "execute",
        "proc.true": "execute",
        "kb.search": "recorded",
        "text.upper": "execute",
        "misc.direct_unsafe": "execute",
    }
    task = {
        "task_id": "t",
        "input": {},
        "observations": [
            {"tool": "kb.search", "args": {"query": "q"}, "body": "[1]", "body_encoding": "text"}
        ],
    }
    run_dir = write_run_dir(tmp_path / "run", workflow, task, manifest_for(dispositions))
    model = scripted(
        [
            completion(None, [("kb.search", {"query": "q"}), ("text.upper", {"text": "a"})]),
            completion("done"),
        ]
    )
    result = run_runtime(run_dir, tmp_path, model=model, python=PY39)
    assert result.messages[0]["python"].startswith("3.9."), result.stderr
    assert result.returncode == 0, result.stderr
    assert [c["body"] for c in result.calls[:4]] == ["3", '"printed"', "0", "0"]
    assert [c["tool"] for c in result.calls[4:]] == [
        "model",
        "kb.search",
        "text.upper",
        "model",
        "misc.direct_unsafe",
    ]
    assert result.calls[5]["body"] == "[1]" and result.calls[6]["body"] == '"A"'
    egress = result.of("egress")
    assert [(e["attempt"]["address"], e["attempt"]["port"], e.get("child")) for e in egress] == [
        ("127.0.0.1", 9, True)
    ]
    assert [c.get("program") for c in result.of("coverage")] == [None, "/bin/true"]
    assert result.episode["status"] == "denied"
    assert result.episode["failure"]["error_class"] == "runner.errors.CapabilityDenied"
