"""Acceptance in real containers: record live, reproduce with egress blocked.

Golden traces under tests/fixtures/golden/ (regenerate with make_golden.py). Every network
test uses only the loopback server of tests/fixtures/golden/loopback.py on 127.0.0.1, contacted
from the host by record mode; inside the sandbox there is no network at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "golden"
HELPDESK = REPO / "examples" / "helpdesk"
CLI = str(Path(sys.executable).parent / "sandbox-replay")

sys.path.insert(0, str(GOLDEN))
from loopback import loopback_server  # noqa: E402

pytestmark = pytest.mark.docker


def _cli(args: list[str], cwd: Path, image: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.update(
        {"SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"), "SANDBOX_REPLAY_IMAGE": image}, **env
    )
    return subprocess.run(
        [CLI, "--log-format", "json", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _reproduce(args: list[str], cwd: Path, image: str) -> tuple[int, Any]:
    """Exit code and the one trace's report (``--json``: ``{exit_code, outcomes, traces}``)."""
    done = _cli(["reproduce", "--json", *args], cwd, image)
    assert done.stdout.strip(), done.stderr
    payload = json.loads(done.stdout)
    assert payload["exit_code"] == done.returncode
    (report,) = payload["traces"]
    return done.returncode, report


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _golden_copy(tmp: Path) -> Path:
    """A copy of the golden folder (workflows, tools, model) to change."""
    target = tmp / "golden"
    shutil.copytree(GOLDEN, target, ignore=shutil.ignore_patterns("__pycache__", "*.jsonl"))
    return target


def test_golden_failing_run_reproduces_with_the_same_signature(
    tmp_path: Path, sandbox_image: str
) -> None:
    trace = GOLDEN / "failing.jsonl"
    before = hashlib.sha256(trace.read_bytes()).hexdigest()
    code, report = _reproduce([str(trace)], tmp_path, sandbox_image)
    assert (code, report["outcome"]) == (0, "reproduced"), report
    recorded = _lines(trace)[-1]
    assert report["replayed"]["failure_signature"] == recorded["failure_signature"]
    assert report["replayed"]["failure"]["tool"] == "customer.get"
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == before == report["trace_sha256"]
    replay = _lines(Path(report["replay_trace"]))
    fetch = replay[1]
    assert fetch["tool"] == "ticket.fetch" and fetch["raw_io"] is True  # parsed again from HTTP
    assert fetch["content_encoding"] == "gzip" and "refund" in fetch["body"]
    assert [c["tool"] for c in replay[1:-1]] == [c["tool"] for c in _lines(trace)[1:-1]]
    from runner.ledger import Ledger

    with Ledger.for_state_dir(tmp_path / "state") as ledger:
        totals = ledger.totals()
    assert totals["live"].committed.runs == 0  # reproduce never charges live
    assert totals["replay"].committed.runs == 1


def test_one_tool_response_removed_is_not_reproduced_naming_that_call(
    tmp_path: Path, sandbox_image: str
) -> None:
    lines = [r for r in _lines(GOLDEN / "failing.jsonl") if r.get("index") != 2]
    trace = _write(tmp_path / "incomplete.jsonl", lines)
    workflow = ["--workflow", str(GOLDEN / "golden.yaml")]  # the trace is away from its folder
    code, report = _reproduce([str(trace), *workflow], tmp_path, sandbox_image)
    assert (code, report["outcome"]) == (1, "not_reproduced"), report
    first = report["first_difference"]
    assert (first["index"], first["tool"], first["args"]) == (2, "kb.lookup", {"topic": "refund"})
    assert "no call at this index" in first["message"]
    assert first["label"] == "extra_turn"  # the recording has no call #2: more calls than it


def test_a_changed_tool_schema_is_refused_naming_the_tool(
    tmp_path: Path, sandbox_image: str
) -> None:
    folder = _golden_copy(tmp_path)
    tools = folder / "golden_tools.py"
    tools.write_text(
        tools.read_text().replace("def lookup(topic: str)", "def lookup(topic: str, lang: str)"),
        encoding="utf-8",
    )
    code, report = _reproduce(
        [str(GOLDEN / "failing.jsonl"), "--workflow", str(folder / "golden.yaml")],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (5, "refused"), report
    assert any("'kb.lookup'" in r and "schema" in r for r in report["refusals"]), report
    assert report["replay_trace"] is None and not (tmp_path / "state" / "traces").exists()


def test_a_changed_prompt_is_not_reproduced_at_the_first_model_call(
    tmp_path: Path, sandbox_image: str
) -> None:
    folder = _golden_copy(tmp_path)
    workflow = folder / "golden.yaml"
    workflow.write_text(
        workflow.read_text().replace("Look the topic up.", "Look the topic up, politely."),
        encoding="utf-8",
    )
    code, report = _reproduce(
        [str(GOLDEN / "failing.jsonl"), "--workflow", str(workflow)], tmp_path, sandbox_image
    )
    assert (code, report["outcome"]) == (1, "not_reproduced"), report
    first = report["first_difference"]
    assert (first["index"], first["tool"], first["message_index"]) == (1, "model", 0)
    assert "message 0 differs" in first["summary"] and "politely" in first["differs"]
    assert first["label"] == "prompt_changed" and "messages" in first["label_rule"]
    assert any(d["field"] == "workflow.hash" for d in report["environment_diff"])


def test_a_pure_tool_whose_code_changed_is_not_reproduced_naming_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    folder = _golden_copy(tmp_path)
    tools = folder / "golden_tools.py"
    tools.write_text(
        tools.read_text().replace("{subject.upper()} -> {advice}", "{subject} => {advice}"),
        encoding="utf-8",
    )
    code, report = _reproduce(
        [str(GOLDEN / "failing.jsonl"), "--workflow", str(folder / "golden.yaml")],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (1, "not_reproduced"), report
    first = report["first_difference"]
    assert (first["index"], first["tool"], first["kind"]) == (4, "text.summarize", "pure_result")
    assert "=>" in first["message"]
    assert first["label"] == "environment"  # same call, same arguments, another result


def test_a_pure_tool_that_secretly_fetches_fails_in_the_sandbox_with_its_destination_logged(
    tmp_path: Path, sandbox_image: str
) -> None:
    folder = _golden_copy(tmp_path)  # the trace is written beside its workflow
    with loopback_server() as server:
        tasks = _write(
            tmp_path / "tasks.jsonl", [{"task_id": "q-1", "input": {"url": f"{server.url}/quote"}}]
        )
        done = _cli(
            [
                "record",
                str(folder / "egress.yaml"),
                "--tasks",
                str(tasks),
                "--task",
                "q-1",
                "-o",
                str(folder / "egress.jsonl"),
                "--json",
            ],
            tmp_path,
            sandbox_image,
        )
        assert done.returncode == 0, done.stderr
        assert server.paths == ["/quote"]  # recorded live: it really fetched (loopback)
    port = int(server.url.rsplit(":", 1)[1])
    recorded = _lines(folder / "egress.jsonl")
    assert recorded[-1]["status"] == "succeeded"
    assert json.loads(recorded[1]["body"]) == {"quote": "stay curious"}
    code, report = _reproduce([str(folder / "egress.jsonl")], tmp_path, sandbox_image)
    assert (code, report["outcome"]) == (1, "not_reproduced"), report
    assert report["replayed"]["status"] == "failed"
    assert report["replayed"]["failure"]["tool"] == "quote.fetch"
    assert report["first_difference"]["tool"] == "quote.fetch"
    assert any(
        (a.get("address") == "127.0.0.1" or a.get("host") == "127.0.0.1") and a.get("port") == port
        for a in report["outbound"]
    ), report["outbound"]


def test_an_unsafe_call_is_served_from_the_trace_and_its_code_never_runs(
    tmp_path: Path, sandbox_image: str
) -> None:
    folder = _golden_copy(tmp_path)
    tasks = _write(tmp_path / "tasks.jsonl", [{"task_id": "m-1", "input": {"label": "x"}}])
    done = _cli(
        [
            "record",
            str(folder / "marker.yaml"),
            "--tasks",
            str(tasks),
            "--task",
            "m-1",
            "-o",
            str(folder / "marker.jsonl"),
        ],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr
    recorded = _lines(folder / "marker.jsonl")
    assert (recorded[1]["tool"], recorded[1]["source"]) == ("scratch.mark", "executed")
    assert recorded[2]["tool"] == "scratch.seen" and recorded[2]["body"] == "true"  # control
    code, report = _reproduce([str(folder / "marker.jsonl")], tmp_path, sandbox_image)
    replay = _lines(Path(report["replay_trace"]))
    assert (replay[1]["tool"], replay[1]["source"], replay[1]["body"]) == (
        "scratch.mark",
        "trace",
        '"marked"',
    )
    assert (replay[2]["tool"], replay[2]["source"]) == ("scratch.seen", "executed")
    assert replay[2]["body"] == "false"  # the unsafe code never ran: no marker
    assert (code, report["outcome"]) == (1, "not_reproduced")
    assert report["first_difference"]["tool"] == "scratch.seen"


def test_a_packet_reproduces_from_the_packet_alone_in_a_fresh_directory(
    tmp_path: Path, sandbox_image: str
) -> None:
    made = tmp_path / "made"
    made.mkdir()
    done = _cli(
        ["packet", str(GOLDEN / "failing.jsonl"), "-o", str(made / "case.tar.gz")],
        made,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copyfile(made / "case.tar.gz", fresh / "case.tar.gz")
    code, report = _reproduce(["case.tar.gz"], fresh, sandbox_image)
    assert (code, report["outcome"]) == (0, "reproduced"), report
    assert sorted(p.name for p in fresh.iterdir()) == ["case.tar.gz", "state"]


def test_several_traces_give_a_table_the_worst_exit_code_and_junit(
    tmp_path: Path, sandbox_image: str
) -> None:
    lines = [r for r in _lines(GOLDEN / "failing.jsonl") if r.get("index") != 5]
    folder = _golden_copy(tmp_path)  # beside its workflow file: found by its hash
    incomplete = _write(folder / "incomplete.jsonl", lines)
    junit = tmp_path / "out.xml"
    done = _cli(
        ["reproduce", str(GOLDEN / "failing.jsonl"), str(incomplete), "--junit", str(junit)],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reproduced" in done.stdout and "not_reproduced" in done.stdout
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 2
    assert [c.find("failure") is not None for c in cases] == [False, True]


def test_the_example_traces_reproduce_as_documented(tmp_path: Path, sandbox_image: str) -> None:
    code, report = _reproduce([str(HELPDESK / "traces" / "failing.jsonl")], tmp_path, sandbox_image)
    assert (code, report["outcome"]) == (0, "reproduced"), report
    failure = report["replayed"]["failure"]
    assert (failure["tool"], failure["error_class"]) == ("customer.get", "KeyError")
    assert failure["message"] == "'C-200'"  # the failure named with its message
    assert report["nondeterminism"]["entries"] == []  # a clean replay lists nothing
    code, report = _reproduce(
        [str(HELPDESK / "traces" / "incomplete.jsonl")], tmp_path, sandbox_image
    )
    assert (code, report["outcome"]) == (1, "not_reproduced"), report
    assert report["first_difference"]["tool"] == "kb.search"
    assert report["first_difference"]["label"] == "extra_turn"  # issue 28's target
    # one trace or two: the same top-level shape, an object with the list inside
    both = _cli(
        [
            "reproduce",
            "--json",
            *(str(HELPDESK / "traces" / n) for n in ("failing.jsonl", "incomplete.jsonl")),
        ],
        tmp_path,
        sandbox_image,
    )
    payload = json.loads(both.stdout)
    assert set(payload) == {"exit_code", "outcomes", "traces"} and both.returncode == 1
    assert payload["outcomes"] == {"reproduced": 1, "not_reproduced": 1}
    assert [t["outcome"] for t in payload["traces"]] == ["reproduced", "not_reproduced"]
    terminal = _cli(
        ["reproduce", str(HELPDESK / "traces" / "failing.jsonl")], tmp_path, sandbox_image
    )
    assert "reproduced failure: call #1 customer.get raised KeyError: 'C-200'" in terminal.stdout


def test_tasks_extracted_from_recorded_runs_run_with_submit(
    tmp_path: Path, sandbox_image: str
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    done = _cli(
        [
            "tasks",
            "extract",
            str(GOLDEN / "failing.jsonl"),
            str(HELPDESK / "traces" / "failing.jsonl"),
            "-o",
            str(tasks),
        ],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr
    done = _cli(
        ["submit", "--variant", str(GOLDEN / "golden.yaml"), "--tasks", str(tasks), "--json"],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"gold-1"' in done.stdout
