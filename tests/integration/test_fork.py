"""The anchored fork in real sandboxes: ``reproduce --fork-at``, ``submit --anchor``, and a
variant that names its own image (Docker).

The help-desk example's recorded failure (``examples/helpdesk/traces/failing.jsonl``: the
customer lookup, call #1, raises ``KeyError``) forked at K=2 under the fixed version
(``v4.yaml``) must recover, with the prefix verified; the golden trace (model turns, a raw I/O
read, a pure tool) covers a prefix with model turns, a diverged prefix and fresh model turns.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "golden"
HELPDESK = REPO / "examples" / "helpdesk"
FAILING = HELPDESK / "traces" / "failing.jsonl"

pytestmark = pytest.mark.docker


def _cli(args: list[str], cwd: Path, image: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["--log-format", "json", *args], cwd, image)


def _fork(args: list[str], cwd: Path, image: str) -> tuple[int, dict[str, Any]]:
    """Exit code and the fork's report (``--json``: ``{exit_code, outcomes, traces}``)."""
    done = _cli(["reproduce", "--json", *args], cwd, image)
    assert done.stdout.strip(), done.stderr
    payload = json.loads(done.stdout)
    assert set(payload) == {"exit_code", "outcomes", "traces"}, payload
    assert payload["exit_code"] == done.returncode
    (report,) = payload["traces"]
    assert payload["outcomes"] == {report["outcome"]: 1}
    return done.returncode, report


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_fixed_version_recovers_from_the_recorded_failure(
    tmp_path: Path, sandbox_image: str
) -> None:
    before = FAILING.read_bytes()
    code, report = _fork(
        [str(FAILING), "--fork-at", "2", "--workflow", str(HELPDESK / "v4.yaml")],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (0, "recovered"), report
    assert report["prefix"] == {"calls": 2, "verified": True, "first_difference": None}
    assert report["fresh"]["status"] == "succeeded"
    assert [c["tool"] for c in report["fresh"]["calls"]] == ["notes.append", "reply.draft"]
    # a failed recording is no answer key: not graded, and said (it was a fake 1.00)
    assert report["grade"]["score"] is None and report["grade"]["expected_from"] is None
    assert "has no expectations to grade against" in report["grade"]["reasons"][0]
    assert report["workflow"]["version"] == "4"
    calls = [line for line in _lines(Path(report["fork_trace"])) if line["type"] == "call"]
    # the prefix served from the trace: the ticket and the recorded failure, at their clock
    recorded = [line for line in _lines(FAILING) if line["type"] == "call"]
    assert [(c["index"], c["source"]) for c in calls[:2]] == [(0, "trace"), (1, "trace")]
    assert calls[1]["error"]["class"] == "KeyError"
    assert [c["clock"] for c in calls[:2]] == [c["clock"] for c in recorded]
    assert [c["source"] for c in calls[2:]] == ["executed", "executed"]
    assert FAILING.read_bytes() == before  # the anchor is never written
    # the unchanged version does not recover from the same state
    code, report = _fork(
        [str(FAILING), "--fork-at", "2", "--workflow", str(HELPDESK / "v2.yaml")],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (1, "not_recovered"), report
    assert report["prefix"]["verified"] and report["fresh"]["status"] == "failed"
    assert report["grade"]["score"] is None
    # graded like an episode of its task: the task file's expectations for ticket-1000
    tasks = str(HELPDESK / "tasks.jsonl")
    code, report = _fork(
        [str(FAILING), "--fork-at", "2", "--workflow", str(HELPDESK / "v4.yaml"), "--tasks", tasks],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (0, "recovered"), report
    assert report["grade"]["expected_from"] == f"task file {tasks}"
    assert 0.0 < report["grade"]["score"] < 1.0  # v4 recovers but never searches the KB
    assert any("never made: kb.search" in r for r in report["grade"]["reasons"])
    terminal = _cli(
        ["reproduce", str(FAILING), "--fork-at", "2", "--workflow", str(HELPDESK / "v4.yaml")],
        tmp_path,
        sandbox_image,
    )
    assert terminal.returncode == 0, terminal.stderr
    assert "forked at call 2 under helpdesk-triage@4: recovered (exit 0)" in terminal.stdout
    assert "prefix verified: 2 recorded calls (calls #0-#1)" in terminal.stdout
    assert "fresh part (from call #2): succeeded; 2 calls" in terminal.stdout


def test_the_anchored_fork_on_the_namespace_backend(
    tmp_path: Path, sandbox_image: str, bwrap_usable: str
) -> None:
    code, report = _fork(
        [
            str(FAILING),
            "--fork-at",
            "2",
            "--workflow",
            str(HELPDESK / "v4.yaml"),
            "--backend",
            "namespace",
        ],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (0, "recovered"), report
    assert report["prefix"]["verified"] and report["fresh"]["status"] == "succeeded"
    assert _lines(Path(report["fork_trace"]))[0]["backend"] == "namespace"


def test_k_out_of_range_and_missing_workflow_are_refused_before_any_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    v4 = str(HELPDESK / "v4.yaml")
    for k in ("0", "3"):
        done = _cli(
            ["reproduce", "--json", str(FAILING), "--fork-at", k, "--workflow", v4],
            tmp_path,
            sandbox_image,
        )
        assert done.returncode == 2, done.stderr
        error = json.loads(done.stdout)
        assert "out of range" in error["error"] and "K is 1 to 2" in error["error"]
        assert error["field"] == "--fork-at"
    done = _cli(["reproduce", str(FAILING), "--fork-at", "1"], tmp_path, sandbox_image)
    assert done.returncode == 2 and "--fork-at: needs --workflow" in done.stderr
    assert not (tmp_path / "state" / "traces").exists()  # no run happened


def _golden_copy(tmp: Path, edit: Any) -> Path:
    folder = tmp / "golden"
    shutil.copytree(GOLDEN, folder, ignore=shutil.ignore_patterns("__pycache__", "*.jsonl"))
    workflow = folder / "golden.yaml"
    workflow.write_text(edit(workflow.read_text(encoding="utf-8")), encoding="utf-8")
    return workflow


def test_a_prefix_whose_model_request_differs_is_diverged_and_does_not_continue(
    tmp_path: Path, sandbox_image: str
) -> None:
    workflow = _golden_copy(
        tmp_path, lambda text: text.replace("Look the topic up.", "Look the topic up, politely.")
    )
    code, report = _fork(
        [str(GOLDEN / "failing.jsonl"), "--fork-at", "3", "--workflow", str(workflow)],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (1, "diverged"), report
    first = report["prefix"]["first_difference"]
    assert (report["prefix"]["verified"], first["index"], first["tool"]) == (False, 1, "model")
    assert report["grade"] is None
    calls = [line for line in _lines(Path(report["fork_trace"])) if line["type"] == "call"]
    assert max(c["index"] for c in calls) < 3  # nothing past K ran


def test_a_fork_with_model_turns_replays_the_recorded_turns_then_asks_fresh_ones(
    tmp_path: Path, sandbox_image: str
) -> None:
    # the fixed version: no customer lookup (the step that failed at call #5)
    workflow = _golden_copy(
        tmp_path, lambda text: text[: text.index("  - id: customer")].rstrip() + "\n"
    )
    code, report = _fork(
        [str(GOLDEN / "failing.jsonl"), "--fork-at", "2", "--workflow", str(workflow)],
        tmp_path,
        sandbox_image,
    )
    assert (code, report["outcome"]) == (0, "recovered"), report
    assert report["prefix"]["verified"]
    calls = [line for line in _lines(Path(report["fork_trace"])) if line["type"] == "call"]
    assert [c["tool"] for c in calls] == [
        "ticket.fetch",
        "model",
        "kb.lookup",
        "model",
        "text.summarize",
    ]
    assert [c["source"] for c in calls if c["tool"] != "model"] == [
        "trace",  # the raw I/O read of the prefix
        "observation",  # the fresh part's read: the anchor's recorded read
        "executed",
    ]


def test_submit_anchor_forks_every_variant_from_the_same_prefix_and_grades_them(
    tmp_path: Path, sandbox_image: str
) -> None:
    done = _cli(
        [
            "submit",
            "--json",
            "--variant",
            str(HELPDESK / "v2.yaml"),
            "--variant",
            str(HELPDESK / "v4.yaml"),
            "--anchor",
            str(FAILING),
            "--fork-at",
            "2",
        ],
        tmp_path,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr
    assert "anchored fork: every run replays the first 2 recorded calls" in done.stderr
    traces = sorted((tmp_path / "state" / "traces").glob("*.jsonl"))
    by_version = {}
    for path in traces:
        lines = _lines(path)
        by_version[lines[0]["workflow"]["version"]] = lines
    assert set(by_version) == {"2", "4"}
    for lines in by_version.values():
        calls = [line for line in lines if line["type"] == "call"]
        assert [c["source"] for c in calls[:2]] == ["trace", "trace"]
    assert by_version["4"][-1]["status"] == "succeeded"
    assert by_version["2"][-1]["status"] == "failed"
    (graded,) = json.loads(done.stdout)["grading"]["tasks"]
    ranks = {entry["variant"]: entry["rank"] for entry in graded["ranking"]}
    assert ranks == {"helpdesk-triage@4": 1, "helpdesk-triage@2": 2}, graded


@pytest.fixture
def two_tags(docker_client: Any, sandbox_image: str, sdk_image: str) -> Iterator[list[str]]:
    """Two tags of our own on two existing images (never a rebuild), removed afterwards."""
    tags = ["sandbox-replay-fork-test:old", "sandbox-replay-fork-test:new"]
    for source, tag in zip((sandbox_image, sdk_image), tags, strict=True):
        repository, name = tag.split(":")
        docker_client.images.get(source).tag(repository, name)
    yield tags
    for tag in tags:
        docker_client.images.remove(tag)  # only the tag: the images keep their own names


def test_each_variant_runs_in_the_image_it_names(
    tmp_path: Path, sandbox_image: str, two_tags: list[str]
) -> None:
    variants = []
    for name, image in zip(("old", "new"), two_tags, strict=True):
        folder = tmp_path / name
        shutil.copytree(HELPDESK, folder, ignore=shutil.ignore_patterns("traces", "__pycache__"))
        path = folder / "v1.yaml"
        text = path.read_text(encoding="utf-8").replace('version: "1"', f'version: "{name}"')
        path.write_text(text + f"image: {image}\n", encoding="utf-8")
        variants += ["--variant", str(path)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text((HELPDESK / "tasks.jsonl").read_text().splitlines()[1] + "\n")
    done = _cli(["submit", *variants, "--tasks", str(tasks)], tmp_path, sandbox_image)
    assert done.returncode == 0, done.stderr
    assert f"image {two_tags[0]}," in done.stdout and f"image {two_tags[1]}," in done.stdout
    environments = {}
    for path in (tmp_path / "state" / "traces").glob("*.jsonl"):
        run = _lines(path)[0]
        environments[run["workflow"]["version"]] = run["environment"]
    assert environments["old"]["image"] == two_tags[0]
    assert environments["new"]["image"] == two_tags[1]
    # two images, two ids: the environment says which one each run had
    assert environments["old"]["image_id"] != environments["new"]["image_id"]
