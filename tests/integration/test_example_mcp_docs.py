"""examples/mcp-docs in real containers: an agent program with its own MCP stdio server.

``check`` lists the server in a sandbox and names its tool in the text form (a new user saw
it in ``--json`` only), ``check`` of the variant declaring the destructive tool exits 3, and
``run`` serves the read tool from the task's observation with the server running in the
sandbox, without warning that the tool "does not resolve" (it warned for every MCP tool).
The image is ``sandbox-replay:sdks`` (the server and agent import ``mcp`` and ``openai``;
``sandbox-replay:latest`` has neither).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.docker

EXAMPLE = REPO / "examples" / "mcp-docs"


def _cli(args: list[str], image: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SANDBOX_REPLAY_IMAGE": image,
        "SANDBOX_REPLAY_STATE_DIR": str(state),
        "SANDBOX_REPLAY_LOG_LEVEL": "warning",
    }
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=EXAMPLE,
        env=env,
        check=False,
    )


def test_check_names_the_mcp_tool_and_refuses_the_destructive_one(
    sdk_image: str, tmp_path: Path
) -> None:
    done = _cli(["check", "v1.yaml"], sdk_image, tmp_path / "state")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "v1.yaml: eligible: 1 step, 1 tool (0 execute, 1 recorded)",
        '  tool "docs.search_docs" of mcp server python3 docs_server.py: read '
        "(MCP annotations: readOnlyHint: true) (recorded)",
    ]
    done = _cli(["check", "v2-unsafe.yaml"], sdk_image, tmp_path / "state")
    assert done.returncode == 3, done.stdout + done.stderr
    assert 'tool "docs.delete_doc" is unsafe (MCP annotations: destructiveHint: true' in (
        done.stdout
    )


def test_run_serves_the_mcp_tool_from_the_task_with_no_false_warning(
    sdk_image: str, tmp_path: Path
) -> None:
    args = ["run", "v1.yaml", "--tasks", "tasks.jsonl", "--task", "D-1", "--json"]
    done = _cli(args, sdk_image, tmp_path / "state")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "does not resolve" not in done.stderr and "eligibility_left" not in done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "succeeded", summary
    lines = [json.loads(line) for line in Path(summary["trace"]).read_text().splitlines()]
    assert "pip install acme" in lines[-1]["output"]
    calls = [line for line in lines if line["type"] == "call"]
    protocol = {c["tool"]: c["source"] for c in calls if c["tool"].startswith("mcp.")}
    assert protocol == {"mcp.initialize": "executed", "mcp.tools.list": "executed"}
    (search,) = [c for c in calls if c["tool"] == "docs.search_docs"]
    assert search["source"] == "observation"
    assert search["args"] == {"query": "How do I install acme?"}
