"""The outbound-destination log: audit hook in the runtime and its Python children.

Network attempts go to loopback only (127.0.0.1:9, where nothing listens), never elsewhere.
These test the hook alone: the egress witness is off (``SANDBOX_REPLAY_EGRESS_WITNESS=off``;
its note saying so is left out here). tests/unit/runtime/test_runtime_witness.py has the
runtime with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import Result, manifest_for, run_runtime, write_run_dir

from runner.runtime.egress import audit
from runner.runtime.egress.childlog import ChildLog
from runner.wire.destinations import destination_key


@pytest.fixture(autouse=True)
def _hook_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_EGRESS_WITNESS", "off")


def _without_witness_note(result: Result) -> Result:
    off = "egress witness off"
    result.messages[:] = [m for m in result.messages if not str(m.get("reason")).startswith(off)]
    return result


def _run(tmp_path: Path, tool: str, args: dict[str, Any] | None = None) -> Result:
    workflow = {
        "name": "w",
        "version": "1",
        "model": None,
        "steps": [
            {"id": "a", "tool": "math.add", "args": {"a": 1, "b": 1}},
            {"id": "x", "tool": tool, "args": args or {}},
        ],
    }
    run_dir = write_run_dir(
        tmp_path / "run",
        workflow,
        {"task_id": "t", "input": {}},
        manifest_for({"math.add": "execute", tool: "execute"}),
    )
    result = _without_witness_note(run_runtime(run_dir, tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.episode["status"] == "succeeded", result.episode
    return result


def _types(result: Result) -> list[str]:
    return [m["type"] for m in result.messages if m["type"] in ("egress", "coverage", "call")]


def test_a_tcp_connect_from_a_tool_is_logged_before_its_call_record(tmp_path: Path) -> None:
    result = _run(tmp_path, "net.connect", {"host": "127.0.0.1", "port": 9})
    assert result.episode["output"].startswith("error: ")  # nothing listens on port 9
    egress = result.of("egress")
    assert len(egress) == 1
    attempt = egress[0]["attempt"]
    assert attempt["kind"] == "connect" and attempt["event"] == "socket.connect"
    assert (attempt["host"], attempt["address"], attempt["port"]) == ("127.0.0.1", "127.0.0.1", 9)
    assert attempt["transport"] == "tcp" and attempt["outcome"] == "attempted"
    assert attempt["pid"] != result.messages[0]["pid"]  # the worker ran the tool, not the runtime
    assert _types(result) == ["call", "egress", "call"]
    assert result.of("coverage") == []


def test_a_udp_sendto_is_logged(tmp_path: Path) -> None:
    result = _run(tmp_path, "net.udp", {"host": "127.0.0.1", "port": 9})
    attempt = result.of("egress")[0]["attempt"]
    assert (attempt["kind"], attempt["address"], attempt["port"], attempt["transport"]) == (
        "sendto",
        "127.0.0.1",
        9,
        "udp",
    )


def test_a_python_child_that_connects_is_logged_through_sitecustomize(tmp_path: Path) -> None:
    result = _run(tmp_path, "net.child", {"port": 9})
    egress = result.of("egress")
    assert len(egress) == 1, result.messages
    assert egress[0]["child"] is True
    attempt = egress[0]["attempt"]
    assert (attempt["kind"], attempt["address"], attempt["port"]) == ("connect", "127.0.0.1", 9)
    assert attempt["pid"] != result.messages[0]["pid"]
    assert result.of("coverage") == []  # a Python child with the hook: full coverage
    assert _types(result) == ["call", "egress", "call"]  # forwarded at the end of its call


def test_a_non_python_child_marks_coverage_partial(tmp_path: Path) -> None:
    result = _run(tmp_path, "proc.true")
    coverage = result.of("coverage")
    assert len(coverage) == 1
    assert coverage[0]["partial"] is True and coverage[0]["program"] == "/bin/true"
    assert coverage[0]["reason"] == "non-Python child process"


def test_a_python_child_that_skips_the_hook_marks_coverage_partial(tmp_path: Path) -> None:
    result = _run(tmp_path, "proc.isolated")
    coverage = result.of("coverage")
    assert len(coverage) == 1 and "-I" in coverage[0]["reason"]


def test_ctypes_marks_coverage_partial_with_the_library(tmp_path: Path) -> None:
    result = _run(tmp_path, "proc.ctypes")
    coverage = result.of("coverage")
    assert [c["symbol"] for c in coverage] == ["getpid"]
    assert "ctypes" in coverage[0]["reason"]


def test_a_workflow_without_network_logs_nothing(tmp_path: Path) -> None:
    result = _run(tmp_path, "text.upper", {"text": "x"})
    assert result.of("egress") == [] and result.of("coverage") == []


# --- the pieces, in process (no hook installed in the test process) -------------------------


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    monkeypatch.setitem(audit._state, "owner_pid", os.getpid())
    monkeypatch.setattr(audit, "_seen_coverage", set())
    monkeypatch.setattr(audit, "_destinations", {})
    monkeypatch.setattr(audit, "_pending", {})
    monkeypatch.setattr(audit, "_dropped", [0])
    audit.drain()
    out: list[dict[str, Any]] = []
    yield out
    out.extend(audit.drain())


@pytest.mark.parametrize(
    ("argv", "partial"),
    [
        (["/usr/bin/python3", "-c", "pass"], None),
        (["python3.11", "script.py", "-I"], None),
        (["python3", "-I", "-c", "pass"], "-I"),
        (["python3", "-uE", "x.py"], "-E"),
        (["python3", "-W", "ignore", "-S", "x.py"], "-S"),
        (["/bin/sh", "-c", "python3 tool.py --flag"], None),
        (["/bin/sh", "-c", "curl http://example.com"], "non-Python"),
        (["/bin/sh", "-c", "python3 a.py; nc host 80"], "non-Python"),
        (["/usr/bin/git", "status"], "non-Python"),
    ],
)
def test_child_classification(
    captured: list[dict[str, Any]], argv: list[str], partial: str | None
) -> None:
    env = audit.child_environment("/tmp/log")
    audit._on_popen("subprocess.Popen", (None, argv, None, env))
    found = audit.drain()
    if partial is None:
        assert found == []
    else:
        assert len(found) == 1 and partial in found[0]["reason"]


def test_a_python_child_with_an_environment_without_the_hook_is_partial(
    captured: list[dict[str, Any]],
) -> None:
    audit._on_popen("subprocess.Popen", (None, ["python3", "x.py"], None, {"PATH": "/bin"}))
    found = audit.drain()
    assert len(found) == 1 and "environment" in found[0]["reason"]


def test_resolved_from_names_the_looked_up_host(captured: list[dict[str, Any]]) -> None:
    audit._on_network("socket.getaddrinfo", ("db.internal", 5432, 0, 1, 0))
    audit._on_network("socket.connect", (None, ("10.1.2.3", 5432)))
    lookup, connect = (m["attempt"] for m in audit.drain())
    assert (lookup["kind"], lookup["host"], lookup["address"]) == ("dns", "db.internal", None)
    assert (connect["host"], connect["address"], connect["resolved_from"]) == (
        "db.internal",
        "10.1.2.3",
        "db.internal",
    )


def test_urls_and_http_connections_are_parsed(captured: list[dict[str, Any]]) -> None:
    audit._on_network("urllib.Request", ("https://api.example.com/v1?q=1", None, {}, "POST"))
    audit._on_network("http.client.connect", (None, "127.0.0.1", 8080))
    url, http = (m["attempt"] for m in audit.drain())
    assert (url["host"], url["port"], url["method"]) == ("api.example.com", 443, "POST")
    assert (http["kind"], http["address"], http["port"]) == ("http", "127.0.0.1", 8080)


def test_the_child_log_forwards_only_complete_valid_lines(tmp_path: Path) -> None:
    log = ChildLog(str(tmp_path))
    good = {
        "type": "egress",
        "attempt": {
            "kind": "connect",
            "address": "127.0.0.1",
            "port": 9,
            "pid": 7,
            "bogus": "dropped",
        },
    }
    with open(log.path, "ab") as handle:
        handle.write(json.dumps(good).encode() + b'\nnot json\n[1]\n{"type":"hello"}\n')
        handle.write(b'{"type":"coverage","partial":true,"program":"/bin/x"')  # incomplete
    first = log.read_new()
    assert first == [
        {
            "type": "egress",
            "child": True,
            "attempt": {"kind": "connect", "address": "127.0.0.1", "port": 9, "pid": 7},
            "count": 1,
        }
    ]
    assert log.malformed == 3
    with open(log.path, "ab") as handle:
        handle.write(b',"pid":8}\n')
    assert log.read_new() == [
        {"type": "coverage", "partial": True, "child": True, "program": "/bin/x", "pid": 8}
    ]
    assert log.read_new() == []


def test_the_child_log_is_capped_visibly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runner.runtime.egress.childlog.MAX_RECORDS", 3)
    log = ChildLog(str(tmp_path))
    line = json.dumps({"type": "egress", "attempt": {"kind": "dns", "host": "h"}}) + "\n"
    Path(log.path).write_text(line * 5)
    out = log.read_new()
    assert [m["type"] for m in out] == ["egress"] * 3 + ["coverage"]
    assert "capped at 3" in out[-1]["reason"]


def test_concurrent_children_append_whole_lines(tmp_path: Path) -> None:
    log = ChildLog(str(tmp_path))
    env = dict(os.environ, **audit.child_environment(log.path))
    code = (  # 100 distinct loopback destinations each: every first attempt is one line
        "import socket\nfor i in range(100):\n    s = socket.socket(socket.AF_INET, "
        "socket.SOCK_DGRAM)\n    s.sendto(b'x', ('127.0.0.1', 40000 + i))\n    s.close()\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(4)]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    records = log.read_new()
    assert log.malformed == 0 and len(records) == 400
    assert {r["attempt"]["pid"] for r in records} == {p.pid for p in procs}


def test_a_forked_child_cannot_write_the_channel_and_its_egress_is_logged(tmp_path: Path) -> None:
    result = _run(tmp_path, "proc.fork_forge")
    assert all(m.get("output") != "FORGED-BY-FORK" for m in result.messages)
    assert result.episode["output"] == 0
    egress = result.of("egress")
    assert len(egress) == 1 and egress[0]["child"] is True
    assert egress[0]["attempt"]["pid"] != result.messages[0]["pid"]


def test_egress_of_a_hanging_call_reaches_the_host_before_the_call_ends(tmp_path: Path) -> None:
    import time

    from fakehost import read_message, send, spawn

    workflow = {
        "name": "w",
        "version": "1",
        "model": None,
        "steps": [{"id": "x", "tool": "net.connect_then_hang", "args": {"seconds": 30}}],
    }
    run_dir = write_run_dir(
        tmp_path / "run",
        workflow,
        {"task_id": "t", "input": {}},
        manifest_for({"net.connect_then_hang": "execute"}),
    )
    proc = spawn(run_dir, tmp_path)
    try:
        assert read_message(proc)["type"] == "hello"  # type: ignore[index]
        send(proc, {"type": "start", "protocol": 1})
        started = time.monotonic()
        egress: list[dict[str, Any]] = []
        while len(egress) < 2:
            message = read_message(proc)
            assert message is not None and message["type"] != "call"
            if message["type"] == "egress":
                egress.append(message)
        assert time.monotonic() - started < 10  # long before the tool's 30 s are over
        # the tool runs in the worker: its connect and its child's both come from the child log
        assert sorted(bool(m.get("child")) for m in egress) == [True, True]
        send(proc, {"type": "shutdown"})
        assert proc.wait(5) == 0
    finally:
        proc.kill()
        proc.wait()


def test_sitecustomize_chains_to_the_one_it_shadows(tmp_path: Path) -> None:
    image_site = tmp_path / "image-site"
    image_site.mkdir()
    marker = tmp_path / "image-sitecustomize-ran"
    (image_site / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    log = ChildLog(str(tmp_path))
    env = dict(os.environ, **audit.child_environment(log.path))
    env["PYTHONPATH"] += os.pathsep + str(image_site)
    code = (
        "import socket\ntry:\n    socket.socket().connect(('127.0.0.1', 9))\n"
        "except OSError:\n    pass\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert marker.exists()
    assert [r["attempt"]["address"] for r in log.read_new()] == ["127.0.0.1"]


def test_outside_a_run_sitecustomize_installs_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != audit.ENV_LOG}
    env["PYTHONPATH"] = os.pathsep.join([audit.SITE_DIR, audit.RUNTIME_ROOT])
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print('runner.runtime.egress.audit' in sys.modules)"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "False"


# --- destinations, counts and the cap ------------------------------------


def test_repeats_are_counted_and_a_later_connect_survives_a_decoy_flood(
    captured: list[dict[str, Any]],
) -> None:
    for i in range(1500):
        audit._on_network("socket.getaddrinfo", (f"decoy-{i % 3}.invalid", 443, 0, 1, 0))
    audit._on_network("socket.connect", (None, ("192.0.2.1", 8443)))
    found = audit.drain()
    assert [m["count"] for m in found] == [500, 500, 500, 1]  # one message per destination
    assert found[-1]["attempt"]["kind"] == "connect"
    assert found[0]["attempt"]["event"] == "socket.getaddrinfo"  # the first attempt in full
    audit._on_network("socket.getaddrinfo", ("decoy-0.invalid", 443, 0, 1, 0))
    (again,) = audit.drain()  # a repeat after a drain: the destination and its new count
    assert again["count"] == 1 and again["attempt"]["host"] == "decoy-0.invalid"


def test_distinct_destinations_past_the_cap_are_counted_as_dropped(
    captured: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "MAX_DESTINATIONS", 5)
    for i in range(8):
        audit._on_network("socket.getaddrinfo", (f"d{i}.invalid", 443, 0, 1, 0))
    audit._on_network("socket.getaddrinfo", ("d0.invalid", 443, 0, 1, 0))  # known: counted
    found = audit.drain()
    assert len([m for m in found if "attempt" in m]) == 5
    assert found[0]["count"] == 2
    assert found[-1] == {"type": "egress", "dropped": 3, "cap": 5}
    assert audit.drain() == []  # drops are reported once


def test_unix_paths_are_distinct_destinations(captured: list[dict[str, Any]]) -> None:
    audit._on_network("socket.connect", (None, "/run/a.sock"))
    audit._on_network("socket.connect", (None, "/run/b.sock"))
    assert [m["attempt"]["address"] for m in audit.drain()] == ["/run/a.sock", "/run/b.sock"]


def test_a_child_writes_new_destinations_at_once_and_its_counts_at_exit(tmp_path: Path) -> None:
    log = ChildLog(str(tmp_path))
    env = dict(os.environ, **audit.child_environment(log.path))
    code = (  # the audit events alone: no lookup is made on the host (nothing leaves it)
        "import sys\n"
        "for i in range(3000):\n"
        "    sys.audit('socket.getaddrinfo', 'decoy-%d.invalid' % (i % 2), 443, 0, 1, 0)\n"
        "sys.audit('socket.sendto', None, ('127.0.0.1', 9))\n"
    )
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode == 0
    records = log.read_new()
    assert log.malformed == 0 and len(records) < 20  # not 3001 lines
    totals: dict[tuple[Any, ...], int] = {}
    for record in records:
        key = destination_key(record["attempt"])
        totals[key] = totals.get(key, 0) + record["count"]
    assert totals == {
        ("dns", "decoy-0.invalid", 443): 1500,
        ("dns", "decoy-1.invalid", 443): 1500,
        ("sendto", "127.0.0.1", 9): 1,
    }
