"""Acceptance: an episode that starts trying a new host fails the gate (real containers).

The tool tries ``new-dependency.invalid`` only when the task says so; the attempt happens inside
the ``network_mode=none`` sandbox (nothing leaves the machine). A baseline written from the run
that does not try it lists no such host: ``run --egress-baseline`` then exits 0 for that task and
1, naming the host, for the task that tries it. ``reproduce`` of the trying run is gated the same.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli, run_cli_json

pytestmark = pytest.mark.docker

TOOLS = """
import socket

from runner.sdk import Effect, tool


@tool("lookup.order", effect=Effect.PURE, description="Looks an order up; maybe phones home.")
def order(order_id: str, phone_home: bool = False) -> dict:
    if phone_home:
        try:
            socket.create_connection(("new-dependency.invalid", 443), timeout=1)
        except OSError:
            pass  # the sandbox has no network: the episode copes with the failure
    return {"order_id": order_id, "status": "shipped"}
"""

WORKFLOW = """\
name: egress
version: "1"
tools: [egress_tools]
steps:
  - id: look
    tool: lookup.order
    args: {order_id: "${task.order_id}", phone_home: "${task.phone_home}"}
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    tasks = [
        {"task_id": "quiet", "input": {"order_id": "A1", "phone_home": False}},
        {"task_id": "noisy", "input": {"order_id": "A2", "phone_home": True}},
    ]
    for name, text in (
        ("egress_tools.py", textwrap.dedent(TOOLS)),
        ("egress.yaml", WORKFLOW),
        ("tasks.jsonl", "".join(json.dumps(t) + "\n" for t in tasks)),
    ):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


def _cli(args: list[str], cwd: Path, image: str) -> tuple[int, Any, str]:
    return run_cli_json(args, cwd, image)


@pytest.mark.slow
def test_a_new_host_fails_the_gate_and_the_same_episode_without_it_passes(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = _project(tmp_path / "egress")
    baseline = work / "egress-baseline.json"
    run = ["run", "egress.yaml", "--tasks", "tasks.jsonl", "--task"]

    code, quiet, _ = _cli(
        [*run, "quiet", "--write-egress-baseline", str(baseline)], work, sandbox_image
    )
    assert code == 0 and quiet["status"] == "succeeded", quiet
    written = json.loads(baseline.read_text(encoding="utf-8"))
    assert written["v"] == 1
    assert all("new-dependency" not in d["host"] for d in written["destinations"]), written

    code, quiet, err = _cli(
        [*run, "quiet", "--egress-baseline", str(baseline)], work, sandbox_image
    )
    assert code == 0, err
    assert "no new destination" in err

    code, noisy, err = _cli(
        [*run, "noisy", "--egress-baseline", str(baseline)], work, sandbox_image
    )
    assert noisy["status"] == "succeeded", noisy  # the episode coped with the failure ...
    assert code == 1, err  # ... but it tried a destination the baseline lacks
    assert "new outbound destination" in err and "new-dependency.invalid:443" in err

    # reproduce of the noisy run replays the same attempt: gated the same way
    code, payload, err = _cli(
        ["reproduce", noisy["trace"], "--egress-baseline", str(baseline)], work, sandbox_image
    )
    (report,) = payload["traces"]  # reproduce --json: {exit_code, outcomes, traces}
    assert report["outcome"] == "reproduced", report
    assert code == 1 and "new-dependency.invalid:443" in err, err

    # a glob that covers the host lets the same episode pass
    widened = work / "widened.json"
    widened.write_text(
        json.dumps({**written, "destinations": [*written["destinations"], {"host": "*.invalid"}]}),
        encoding="utf-8",
    )
    code, _, err = _cli([*run, "noisy", "--egress-baseline", str(widened)], work, sandbox_image)
    assert code == 0, err


def test_a_bad_baseline_is_refused_before_any_sandbox_starts(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = _project(tmp_path / "bad")
    bad = work / "bad.json"
    bad.write_text('{"v": 1, "destinations": [{"host": "x", "colour": "red"}]}', encoding="utf-8")
    done = run_cli(
        [
            "run",
            "egress.yaml",
            "--tasks",
            "tasks.jsonl",
            "--task",
            "quiet",
            "--egress-baseline",
            str(bad),
        ],
        work,
        sandbox_image,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "destinations.0.colour" in done.stderr and "Traceback" not in done.stderr
    assert not (work / "state" / "runs").exists() or not any((work / "state" / "runs").iterdir())


def test_submit_names_the_episode_that_tried_a_new_host(tmp_path: Path, sandbox_image: str) -> None:
    work = _project(tmp_path / "submit")
    baseline = work / "baseline.json"
    baseline.write_text('{"v": 1, "destinations": []}', encoding="utf-8")
    code, report, err = _cli(
        [
            "submit",
            "--variant",
            "egress.yaml",
            "--tasks",
            "tasks.jsonl",
            "--egress-baseline",
            str(baseline),
        ],
        work,
        sandbox_image,
    )
    statuses = {pair["task_id"]: pair["status"] for pair in report["pairs"]}
    assert statuses == {"quiet": "succeeded", "noisy": "succeeded"}, report
    assert code == 1, err
    lines = [line for line in err.splitlines() if "new outbound destination" in line]
    assert lines and all("noisy" in line for line in lines), err
    assert any("new-dependency.invalid:443" in line for line in lines), err
