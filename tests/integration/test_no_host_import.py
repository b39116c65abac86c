"""``run`` and ``submit`` never import the code under evaluation on the host.

The tool module writes a file and connects to a loopback listener this test starts, at
import time. Both commands describe it inside a sandbox: no file and no connection on the
host, and the attempt is logged from the sandbox (the describing sandbox's outbound log, and
the episode's own). The description is kept by the snapshot's digest: a second ``run``, or
``submit --resume``, starts no describing sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.import_time import loopback_listener, write_project

CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = pytest.mark.docker


def _cli(cwd: Path, image: str, *args: str) -> tuple[int, str, list[dict[str, Any]]]:
    env = {
        **os.environ,
        "SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"),
        "SANDBOX_REPLAY_IMAGE": image,
    }
    done = subprocess.run(
        [CLI, "--log-format", "json", "--log-level", "info", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    events = []
    for line in done.stderr.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return done.returncode, done.stdout, events


def _named(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == name]


def _outbound_to(port: int, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in _named(events, "tool_import_outbound") if f":{port}" in json.dumps(e)]


def test_run_describes_in_a_sandbox_and_logs_the_attempt_from_there(
    tmp_path: Path, sandbox_image: str
) -> None:
    with loopback_listener() as listener:
        workflow, tasks, marker = write_project(tmp_path / "project", listener.port)
        args = ("run", str(workflow), "--tasks", str(tasks), "--task", "t1", "--json")
        code, out, events = _cli(tmp_path, sandbox_image, *args)
        assert code == 0, (out, events[-5:])
        result = json.loads(out)
        assert result["status"] == "succeeded" and result["output"] == "said: hi"
        [logged] = _outbound_to(listener.port, events)  # from the describing sandbox
        assert logged["cached"] is False and "127.0.0.1" in json.dumps(logged)
        # the episode imports the module too, in its own sandbox: its outbound log says so
        assert any(a.get("port") == listener.port for a in result["outbound"]), result["outbound"]
        assert _named(events, "tool_manifest_starting"), "no describing sandbox was started"
        again_code, again_out, again = _cli(tmp_path, sandbox_image, *args)
        assert again_code == 0 and json.loads(again_out)["status"] == "succeeded"
        assert not _named(again, "tool_manifest_starting"), "described again, same snapshot"
        assert [e["reused"] for e in _named(again, "tool_description")] == [True]
        assert _outbound_to(listener.port, again)[0]["cached"] is True
        time.sleep(0.3)
        assert not marker.exists(), "the host imported the tool module"
        assert listener.accepted == [], "the tool module connected from the host"


def test_submit_describes_in_a_sandbox_and_resume_reuses_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    with loopback_listener() as listener:
        workflow, tasks, marker = write_project(tmp_path / "project", listener.port)
        args = ("submit", "--variant", str(workflow), "--tasks", str(tasks), "--json")
        code, out, events = _cli(tmp_path, sandbox_image, *args)
        assert code == 0, (out, events[-5:])
        report = json.loads(out)
        assert report["runs_by_status"] == {"succeeded": 1}, report
        assert _outbound_to(listener.port, events) and _named(events, "tool_manifest_starting")
        resumed_code, _, resumed = _cli(
            tmp_path, sandbox_image, "submit", "--resume", report["job_id"], "--json"
        )
        assert resumed_code == 0
        assert not _named(resumed, "tool_manifest_starting"), "resume described again"
        assert [e["reused"] for e in _named(resumed, "tool_description")] == [True]
        time.sleep(0.3)
        assert not marker.exists(), "the host imported the tool module"
        assert listener.accepted == [], "the tool module connected from the host"
