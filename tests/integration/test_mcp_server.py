"""Acceptance: an MCP stdio server's tools/list is asked inside a sandbox (real
containers): annotated tools get their classes, an unannotated one is unsafe, a workflow using
it is ineligible with the tool named, and the server never runs on the host."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli, run_cli_json
from tests.support.paths import REPO

SERVER = REPO / "tests" / "fixtures" / "mcp" / "docs_server.py"

pytestmark = pytest.mark.docker

# The server writes this marker beside itself when it starts: where the folder is the
# sandbox's read-only copy the write fails; on the host it would succeed.
MARKER_PATCH = """
import os as _os
try:
    open(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "RAN_HERE"), "w").close()
except OSError:
    pass
"""


def _project(root: Path, tool: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    server = root / "docs_server.py"
    server.write_text(SERVER.read_text(encoding="utf-8") + MARKER_PATCH, encoding="utf-8")
    server.chmod(0o644)
    workflow = root / "wf.yaml"
    workflow.write_text(
        "name: mcpdocs\nversion: '1'\ntools:\n"
        "  - mcp: {command: [python3, docs_server.py], prefix: docs}\n"
        f"steps:\n  - id: s\n    tool: docs.{tool}\n",
        encoding="utf-8",
    )
    workflow.chmod(0o644)
    return workflow


def _check(workflow: Path, image: str) -> tuple[int, Any, str]:
    return run_cli_json(["check", str(workflow)], workflow.parent, image)


def test_the_server_is_listed_in_a_sandbox_and_its_annotations_decide(
    tmp_path: Path, sandbox_image: str
) -> None:
    code, report, err = _check(_project(tmp_path / "read", "search_docs"), sandbox_image)
    assert code == 0, (report, err)
    (tool,) = report["workflows"][0]["tools"]
    assert tool["id"] == "docs.search_docs" and tool["effect"] == "read"
    assert "readOnlyHint: true" in tool["decided_by"]
    assert not (tmp_path / "read" / "RAN_HERE").exists()  # it ran in the sandbox only


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("send_email", "no annotations"),
        ("delete_doc", "destructiveHint: true"),
        ("add_note", "destructiveHint: false, openWorldHint: false"),
    ],
)
def test_a_workflow_using_an_unsafe_mcp_tool_is_ineligible_naming_it(
    tmp_path: Path, sandbox_image: str, tool: str, why: str
) -> None:
    code, report, err = _check(_project(tmp_path / tool, tool), sandbox_image)
    assert code == 3, (report, err)
    (problem,) = report["workflows"][0]["problems"]
    assert problem["tool"] == f"docs.{tool}" and problem["effect"] == "unsafe"
    assert why in problem["message"], problem


def test_a_server_that_cannot_list_is_invalid_input_naming_the_entry(
    tmp_path: Path, sandbox_image: str
) -> None:
    workflow = _project(tmp_path / "broken", "search_docs")
    (workflow.parent / "docs_server.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    code, report, err = _check(workflow, sandbox_image)
    assert code == 2, (report, err)
    (problem,) = report["workflows"][0]["problems"]
    assert "could not list its tools" in problem["message"] and "ended" in problem["message"]
    assert problem["field"] == "tools[0]"


def test_the_server_cannot_reach_the_network_while_listing(
    tmp_path: Path, sandbox_image: str
) -> None:
    """A server that phones home while listing: the attempt fails inside the sandbox."""
    workflow = _project(tmp_path / "net", "search_docs")
    server = workflow.parent / "docs_server.py"
    server.write_text(
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 443), timeout=1)\n"
        "    raise SystemExit('connected: the sandbox has a network')\nexcept OSError:\n    pass\n"
        + server.read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    code, report, err = _check(workflow, sandbox_image)
    assert code == 0, (report, err)
    shutil.rmtree(workflow.parent / "state", ignore_errors=True)


def test_a_run_serves_the_mcp_tool_from_the_tasks_recording(
    tmp_path: Path, sandbox_image: str
) -> None:
    """Calls to MCP tools are served from recordings, like imported tools; the server never
    runs for the episode (only the describing sandbox asked it for its list)."""
    workflow = _project(tmp_path / "run", "search_docs")
    text = workflow.read_text(encoding="utf-8") + '    args: {query: "${task.q}"}\n'
    workflow.write_text(text, encoding="utf-8")
    observation = {"tool": "docs.search_docs", "args": {"query": "refund"}, "body": '"policy 7"'}
    task = {"task_id": "t1", "input": {"q": "refund"}, "observations": [observation]}
    (workflow.parent / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    done = run_cli(
        ["run", "wf.yaml", "--tasks", "tasks.jsonl", "--task", "t1", "--json"],
        workflow.parent,
        sandbox_image,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "succeeded", summary
    trace = [json.loads(line) for line in Path(summary["trace"]).read_text().splitlines()]
    (call,) = [line for line in trace if line["type"] == "call"]
    assert call["tool"] == "docs.search_docs" and call["source"] == "observation", call
    assert call["body"] == '"policy 7"'
    assert trace[-1]["output"] == "policy 7"

    # the packet carries the server's file; reproduce of it lists the server in a sandbox again
    packet = tmp_path / "run.tar.gz"
    done = run_cli(["packet", summary["trace"], "-o", str(packet)], workflow.parent, sandbox_image)
    assert done.returncode == 0, done.stderr
    with tarfile.open(packet) as archive:
        names = archive.getnames()
    assert any(name.endswith("docs_server.py") for name in names), names
    done = run_cli(["reproduce", str(packet), "--json"], tmp_path, sandbox_image)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["traces"][0]["outcome"] == "reproduced"


def test_a_server_whose_command_names_no_file_of_the_folder_is_listed(
    tmp_path: Path, sandbox_image: str
) -> None:
    """``command: [python3, -c, CODE]`` (like ``npx some-server``): nothing of the workflow's
    folder to mount; the server runs in the sandbox's /tmp and is listed all the same."""
    workflow = _project(tmp_path / "inline", "search_docs")
    code = SERVER.read_text(encoding="utf-8")
    text = workflow.read_text(encoding="utf-8").replace(
        "[python3, docs_server.py]", json.dumps(["python3", "-c", code])
    )
    workflow.write_text(text, encoding="utf-8")
    (workflow.parent / "docs_server.py").unlink()
    result, report, err = _check(workflow, sandbox_image)
    assert result == 0, (report, err)
    (tool,) = report["workflows"][0]["tools"]
    assert tool["id"] == "docs.search_docs" and tool["effect"] == "read"
