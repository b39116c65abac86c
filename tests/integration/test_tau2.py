"""Acceptance on real input: the public τ²-bench retail results, in real containers.

The results live outside the repository (setting ``realdata_dir``, default ``../shared/realdata``
relative to the project root, env ``SANDBOX_REPLAY_REALDATA_DIR``); without them these tests
skip, and fail with a clear message under ``CI=true``. Everything runs through the CLI as a user
would: ``import tau2``, ``lint``, ``reproduce`` (unmodified, a tool result altered, the system
prompt changed), ``check`` and ``submit`` of the scripted retail agent of
``examples/tau2-retail`` (v1 and v2) over the 40 imported tasks. Our own chat-message fixture
(assistant text together with tool calls, a reused tool-call id) is imported and reproduced
end to end too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runner.settings import Settings
from runner.trace.format import failure_signature

REPO = Path(__file__).resolve().parents[2]
RETAIL_EXAMPLE = REPO / "examples" / "tau2-retail"
OWN_FIXTURE = REPO / "tests" / "fixtures" / "import" / "reproducible.jsonl"
CLI = str(Path(sys.executable).parent / "sandbox-replay")
WRITE_TOOLS = {
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
}
GENERIC_TOOLS = {"calculate", "transfer_to_human_agents"}

pytestmark = pytest.mark.docker


def realdata_results() -> Path:
    """``tau2-retail/results.json`` under the configured realdata folder (or skip / fail)."""
    folder = Settings().realdata_dir
    folder = folder if folder.is_absolute() else (REPO / folder).resolve()
    path = folder / "tau2-retail" / "results.json"
    if not path.is_file():
        message = (
            f"τ² retail results not found at {path}: set SANDBOX_REPLAY_REALDATA_DIR to the "
            "realdata folder (default ../shared/realdata relative to the project root)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def cli(
    args: list[str], cwd: Path, image: str, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update({"SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"), "SANDBOX_REPLAY_IMAGE": image})
    return subprocess.run(
        [CLI, "--log-format", "json", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def as_list(payload: Any) -> list[dict[str, Any]]:
    """The per-trace reports of ``reproduce --json`` (``{exit_code, outcomes, traces}``)."""
    return list(payload["traces"])


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
    )
    return path


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Path:
    results = realdata_results()
    work = tmp_path_factory.mktemp("tau2")
    done = cli(["import", "tau2", str(results), "--out", "import", "--json"], work, sandbox_image)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["runs"] == 40 and report["failed_runs"] == 6, report
    assert report["calls"]["tool"] == 299 and report["tool_errors"] == 12
    return work / "import"


def test_all_runs_import_and_lint_names_what_they_lack(imported: Path, sandbox_image: str) -> None:
    traces = sorted((imported / "traces").glob("*.jsonl"))
    assert len(traces) == 40
    done = cli(["lint", "--json", "traces"], imported, sandbox_image)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert len(report["traces"]) == 40
    for trace in report["traces"]:
        fields = trace["summary"]["fields"]
        provider_calls = sum(1 for c in trace["calls"] if c["kind"] in ("model", "user"))
        # the source kept the provider's choice, not the HTTP body, and only a model alias
        assert fields["body"]["missing"] == provider_calls > 0, trace["file"]
        assert fields["model_id"]["missing"] == provider_calls, trace["file"]
        assert fields["schema_hash"]["missing"] == 0 and fields["clock"]["missing"] == 0
    text = json.dumps(report)
    assert "came from the configuration, not the response" in text
    assert "not the provider's HTTP body" in text


@pytest.mark.slow
def test_every_unmodified_run_reproduces_and_failed_runs_keep_their_verdict(
    imported: Path, sandbox_image: str
) -> None:
    done = cli(["reproduce", "--json", "traces"], imported, sandbox_image, timeout=1200)
    reports = as_list(json.loads(done.stdout))
    outcomes = Counter(r["outcome"] for r in reports)
    assert outcomes == {"reproduced": 40}, [
        (r["input"], r["reason"]) for r in reports if r["outcome"] != "reproduced"
    ]
    assert done.returncode == 0
    failed = [r for r in reports if r["recorded"]["status"] == "failed"]
    assert len(failed) == 6
    for report in failed:
        recorded = lines_of(imported / report["input"])
        end = recorded[-1]
        last = len(recorded) - 3  # index of the last call (run and end lines excluded)
        signature = failure_signature(last, "workflow", "task_failed", 1)
        assert end["failure_signature"] == signature
        assert report["replayed"]["failure_signature"] == signature
        assert report["replayed"]["failure"]["error_class"] == "task_failed"
        assert report["replayed"]["source_verdict"] is True
    for report in reports:
        if report["recorded"]["status"] == "succeeded":
            assert report["replayed"]["status"] == "succeeded"
            assert report["replayed"]["failure_signature"] is None
        assert report["outbound"] == []


def _first_tool_call(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return next(
        line for line in lines if line["type"] == "call" and line["tool"] not in ("model", "user")
    )


def test_one_tool_result_altered_is_not_reproduced_at_the_next_model_turn(
    imported: Path, sandbox_image: str, tmp_path: Path
) -> None:
    source = imported / "traces" / "tau2-retail-100-0.jsonl"
    lines = lines_of(source)
    tool_call = _first_tool_call(lines)
    tool_call["body"] = tool_call["body"] + " (altered)"
    altered = write_lines(imported / "traces" / "altered-tool-result.jsonl", lines)
    try:
        done = cli(["reproduce", "--json", str(altered)], imported, sandbox_image)
    finally:
        altered.unlink()
    (report,) = as_list(json.loads(done.stdout))
    assert (done.returncode, report["outcome"]) == (1, "not_reproduced"), report
    following = next(
        line["index"]
        for line in lines[1:-1]
        if line["tool"] == "model" and line["index"] > tool_call["index"]
    )
    difference = report["first_difference"]
    assert difference["index"] == following and difference["tool"] == "model", difference
    assert "(altered)" in difference["message"]


def test_changed_system_prompt_is_not_reproduced_at_the_first_model_turn(
    imported: Path, sandbox_image: str
) -> None:
    workflow = (imported / "workflow.yaml").read_text(encoding="utf-8")
    assert "# Retail agent policy" in workflow
    changed = imported / "changed-system.yaml"
    changed.write_text(workflow.replace("# Retail agent policy", "# Retail agent rules"), "utf-8")
    trace = imported / "traces" / "tau2-retail-101-0.jsonl"
    done = cli(
        ["reproduce", "--json", "--workflow", str(changed), str(trace)], imported, sandbox_image
    )
    (report,) = as_list(json.loads(done.stdout))
    assert (done.returncode, report["outcome"]) == (1, "not_reproduced"), report
    first_model = next(line["index"] for line in lines_of(trace)[1:-1] if line["tool"] == "model")
    difference = report["first_difference"]
    assert (difference["index"], difference["tool"]) == (first_model, "model"), difference
    assert difference["message_index"] == 0 and "Retail agent rules" in difference["message"]


def test_check_full_toolset_ineligible_read_only_eligible(
    imported: Path, sandbox_image: str
) -> None:
    full = cli(["check", "workflow.yaml"], imported, sandbox_image)
    assert full.returncode == 3, full.stdout + full.stderr
    named = {
        tool for tool in WRITE_TOOLS | GENERIC_TOOLS if f'tool "{tool}" is unsafe' in full.stdout
    }
    assert named == WRITE_TOOLS | GENERIC_TOOLS, full.stdout
    for read_tool in ("get_user_details", "get_order_details", "find_user_id_by_email"):
        assert f'"{read_tool}"' not in full.stdout
    read_only = cli(["check", "workflow.read-only.yaml"], imported, sandbox_image)
    assert read_only.returncode == 0, read_only.stdout + read_only.stderr
    assert "eligible" in read_only.stdout


def _unrecorded(trace: Path) -> list[dict[str, Any]]:
    return [
        line
        for line in lines_of(trace)
        if line["type"] == "call"
        and (line.get("error") or {}).get("class", "").endswith("UnrecordedCall")
    ]


@pytest.mark.slow
def test_submit_scripted_retail_agent_v1_v2_over_the_40_tasks(
    imported: Path, sandbox_image: str, tmp_path: Path
) -> None:
    work = tmp_path / "tau2-retail"
    shutil.copytree(
        RETAIL_EXAMPLE,
        work,
        ignore=shutil.ignore_patterns("import", ".sandbox-replay", "__pycache__"),
    )
    shutil.copytree(
        imported, work / "import", ignore=shutil.ignore_patterns("state", ".sandbox-replay")
    )
    done = cli(
        [
            "submit",
            "--variant",
            "v1.yaml",
            "--variant",
            "v2.yaml",
            "--tasks",
            "import/tasks.read-only.jsonl",
            "--json",
        ],
        work,
        sandbox_image,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["status"] == "complete" and report["runs_by_status"] == {"succeeded": 80}
    grading = report["grading"]
    assert grading["judge"] == "rubric"
    ratings = {v["variant"]: v["rating"]["mu"] for v in grading["variants"]}
    assert ratings["retail-reader@2"] > ratings["retail-reader@1"], ratings
    scores: dict[str, list[float]] = {}
    for task in grading["tasks"]:
        for entry in task["ranking"]:
            scores.setdefault(entry["variant"], []).append(entry["score"])
        assert set(task["detail"]["reasons"]) == {"retail-reader@1", "retail-reader@2"}
    assert len(scores["retail-reader@1"]) == 40
    assert sum(scores["retail-reader@2"]) > sum(scores["retail-reader@1"])
    # v1 misses the expected product look-ups, and the report says so
    reasons = json.dumps([t["detail"] for t in grading["tasks"]])
    assert "never made: get_product_details" in reasons

    tasks = {
        json.loads(line)["task_id"]: json.loads(line)
        for line in (work / "import" / "tasks.read-only.jsonl").read_text("utf-8").splitlines()
    }
    misses: Counter[str] = Counter()
    served = 0
    for pair in report["pairs"]:
        trace = Path(pair["trace"])
        observations = tasks[pair["task_id"]]["observations"]
        for call in lines_of(trace):
            if call["type"] != "call" or call["tool"] in ("model", "user"):
                continue
            assert call["tool"] not in WRITE_TOOLS | GENERIC_TOOLS
            if call.get("source") == "observation" and "body" in call:
                # served from the real recorded observation of this task, verbatim
                assert any(
                    o["tool"] == call["tool"]
                    and o["args"] == call["args"]
                    and o["body"] == call["body"]
                    for o in observations
                ), call
                served += 1
        for miss in _unrecorded(trace):
            misses[pair["variant"]] += 1
            message = miss["error"]["message"]
            assert "unrecorded call" in message and repr(miss["tool"]) in message, message
            first_value = str(next(iter(miss["args"].values())))
            assert first_value in message, message
    assert served > 100
    # reads the benchmark's agent never made have no recording: data in the episode, not a crash
    assert misses["retail-reader@2"] > misses["retail-reader@1"] >= 0
    assert misses["retail-reader@2"] > 0


def test_own_chat_fixture_text_with_calls_and_reused_ids_reproduces(
    tmp_path: Path, sandbox_image: str
) -> None:
    done = cli(
        ["import", "openai-messages", str(OWN_FIXTURE), "--out", "imp", "--json"],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "imp"
    first = lines_of(out / "traces" / "reproducible-1.jsonl")
    second = lines_of(out / "traces" / "reproducible-2.jsonl")
    # assistant text together with tool calls is one model turn whose message keeps both
    turn = json.loads(first[1]["body"])["message"]
    assert turn["content"].startswith("Je regarde") and len(turn["tool_calls"]) == 2
    # call_1 is reused for a later, different call: results matched by position
    closes = [c for c in first if c.get("tool") == "close_ticket"]
    assert closes and closes[0]["meta"]["call_id"] == "call_1"
    assert [c["args"]["ticket_id"] for c in second if c.get("tool") == "get_ticket"] == [
        "T-1",
        "T-2",
    ]
    done = cli(["reproduce", "--json", "traces"], out, sandbox_image)
    reports = as_list(json.loads(done.stdout))
    assert done.returncode == 0 and [r["outcome"] for r in reports] == ["reproduced"] * 2, reports
    # the two results with one id swapped: the replay notices at the next model turn
    swapped = [dict(line) for line in second]
    tools = [line for line in swapped if line.get("tool") == "get_ticket"]
    tools[0]["body"], tools[1]["body"] = tools[1]["body"], tools[0]["body"]
    path = write_lines(out / "swapped.jsonl", swapped)
    done = cli(["reproduce", "--json", str(path)], out, sandbox_image)
    (report,) = as_list(json.loads(done.stdout))
    assert (done.returncode, report["outcome"]) == (1, "not_reproduced"), report
    assert report["first_difference"]["tool"] == "model"
