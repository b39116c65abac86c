"""The README's "Your own agent code" on examples/agent-program, in real containers.

``check`` (v1, v2 eligible; v3 declares ``ticket.close``: exit 3 naming it), ``submit`` of v1
against v2 (v2 first on every task), and a production recording (record_production.py: the
agent in this process under ``runner.sdk.record``, against the scripted model on loopback)
reproduced offline in a sandbox. The image is ``sandbox-replay:sdks`` (the agent imports
``openai``). Needs program steps (i13-gateway): skipped where the workflow model has none.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "agent-program"


@pytest.fixture(scope="module")
def image(sdk_image: str) -> str:
    """The example runs in the agent-SDK image (tests/conftest.py)."""
    return sdk_image


def _cli(
    args: list[str], image: str, state: Path, cwd: Path = EXAMPLE
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SANDBOX_REPLAY_IMAGE": image,
        "SANDBOX_REPLAY_STATE_DIR": str(state),
        "SANDBOX_REPLAY_LOG_LEVEL": "warning",
    }
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env=env,
        check=False,
    )


def _record_production(folder: Path, traces: Path) -> Path:
    """Run ``folder``'s record_production.py (the scripted model on loopback); T-1001's trace."""
    record = [sys.executable, str(folder / "record_production.py"), "--out", str(traces)]
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    recorded = subprocess.run(
        record, capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert recorded.returncode == 0, recorded.stderr
    return traces / "prod-v1-T-1001.jsonl"


def test_check_submit_and_reproduce_the_example(image: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = _cli(["check", "v1.yaml", "v2.yaml"], image, state)
    assert done.returncode == 0, done.stdout + done.stderr
    done = _cli(["check", "v3-unsafe.yaml"], image, state)
    assert done.returncode == 3 and 'tool "ticket.close" is unsafe' in done.stdout + done.stderr

    args = ["submit", "--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", "tasks.jsonl"]
    done = _cli(args, image, state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runs: 6 succeeded" in done.stdout
    table = done.stdout[done.stdout.index("tournament") :]
    assert table.index("support-agent@2") < table.index("support-agent@1")
    assert "3/0/0" in table

    trace = _record_production(EXAMPLE, tmp_path / "traces")
    done = _cli(["reproduce", str(trace)], image, state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduced (exit 0)" in done.stdout


def test_a_packet_of_a_program_step_reproduces_in_a_fresh_folder(
    image: str, tmp_path: Path
) -> None:
    """Issue 27: the packet carries the program module, the modules of its folder it imports
    and the requirements file the workflow names; unpacked elsewhere, on a clean state
    folder, it reproduces (was: ``program module 'support_agent' ... is not found``)."""
    import shutil
    import tarfile

    trace = _record_production(EXAMPLE, tmp_path / "traces")
    made = tmp_path / "made" / "case.tar.gz"
    done = _cli(["packet", str(trace), "-o", str(made)], image, tmp_path / "s1")
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(made) as packed:
        names = set(packed.getnames())
    assert {
        "workflow/support_agent.py",  # the program module
        "workflow/agentloop.py",  # a module of its folder it imports
        "workflow/support_tools.py",
        "workflow/requirements.txt",  # what its image was built from
    } <= names, names
    assert "workflow/support_agent_v2.py" not in names  # nothing it does not import
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copyfile(made, fresh / "case.tar.gz")
    done = _cli(["reproduce", "case.tar.gz"], image, fresh / "state", cwd=fresh)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduced (exit 0)" in done.stdout


def test_the_environment_diff_names_the_agent_file_that_changed(image: str, tmp_path: Path) -> None:
    """Issue 27: a recording and its replay hash the program's module and the modules of its
    folder it imports (``environment.agent_code``); the diff names the file that changed, and
    the SDK versions the recording lists (was: no line for either)."""
    import json
    import shutil

    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "traces"))
    trace = _record_production(project, tmp_path / "traces")
    environment = json.loads(trace.read_text().splitlines()[0])["environment"]
    assert set(environment["agent_code"]) == {
        "agentloop.py",
        "support_agent.py",
        "support_tools.py",
    }
    assert "openai" in environment["packages"]
    loop = project / "agentloop.py"
    loop.write_text(loop.read_text() + "\n# a comment: the behaviour is the same\n")
    done = _cli(["reproduce", "--json", str(trace)], image, tmp_path / "state", cwd=project)
    report = json.loads(done.stdout)["traces"][0]  # one object, a list inside
    assert report["outcome"] == "reproduced", done.stdout + done.stderr
    fields = {d["field"]: d for d in report["environment_diff"]}
    assert "agent_code.agentloop.py" in fields, fields
    assert fields["agent_code.agentloop.py"]["why"] == "the agent's code changed"
    assert "agent_code.support_agent.py" not in fields  # unchanged files are not named
