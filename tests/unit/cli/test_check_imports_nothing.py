"""``check`` runs nothing and needs no engine: the tool module acts at import time.

The module writes a file and connects to a loopback listener this test starts, at import.
``check`` (a real CLI process, DOCKER_HOST pointing at a socket that does not exist) still
gives the right verdict, and neither the file nor the connection happens on the host. A
control run of the old path (`runner.tools.source.registry_for_workflow`, the host import
``record`` keeps) shows the probe would see both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from runner.domain.workflow import load_workflow
from runner.tools.source import registry_for_workflow
from tests.support.import_time import loopback_listener, write_project

CLI = str(Path(sys.executable).parent / "sandbox-replay")


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DOCKER_HOST": f"unix://{cwd}/no-engine-here.sock",
        "SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"),
    }
    return subprocess.run(
        [CLI, "check", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_imports_nothing_and_needs_no_engine(tmp_path: Path) -> None:
    with loopback_listener() as listener:
        workflow, _, marker = write_project(tmp_path / "project", listener.port)
        done = _check(tmp_path, str(workflow), "--json")
        time.sleep(0.3)  # a connection would have been accepted by now
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)
        [tool] = report["workflows"][0]["tools"]
        assert tool["id"] == "echo.say" and tool["effect"] == "pure"
        assert tool["schema_hash"] == _say_schema_hash()
        assert not marker.exists(), "check imported the tool module on the host"
        assert listener.accepted == [], "check let the tool module connect from the host"
        assert not (tmp_path / "state").exists(), "check wrote state"
        typo = workflow.parent / "typo.yaml"
        typo.write_text(workflow.read_text().replace("echo.say", "echo.nope"))
        bad = _check(tmp_path, str(typo))
        assert bad.returncode == 3 and 'tool "echo.nope" does not resolve' in bad.stdout
        assert not marker.exists() and listener.accepted == []


def _say_schema_hash() -> str:
    """The schema hash the runtime derives for ``say(text: str)`` (runner.sdk.toolschema)."""
    from runner.sdk import schema_hash

    return schema_hash(
        {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        }
    )


def test_control_the_host_import_would_be_seen(tmp_path: Path) -> None:
    """The probe works: importing the module on the host (record's path) is detected."""
    with loopback_listener() as listener:
        workflow, _, marker = write_project(tmp_path / "project", listener.port)
        registry_for_workflow(load_workflow(workflow))
        deadline = time.monotonic() + 5
        while not listener.accepted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists() and listener.accepted
