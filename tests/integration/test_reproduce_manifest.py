"""reproduce describes the tools in a real sandbox: a packet's code never runs on the host.

The registry of a reproduced workflow comes from runtime mode ``manifest`` in the hardened
container (runner/admission/describe.py). Every module payload here tries to leave a
mark on the host; none may appear, whatever the outcome.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "golden"
CLI = str(Path(sys.executable).parent / "sandbox-replay")

pytestmark = pytest.mark.docker


def _reproduce(args: list[str], cwd: Path, image: str, **env: str) -> tuple[int, dict[str, Any]]:
    full_env = {
        **os.environ,
        "SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"),
        "SANDBOX_REPLAY_IMAGE": image,
        **env,
    }
    done = subprocess.run(
        [CLI, "--log-format", "json", "reproduce", "--json", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stdout.strip(), done.stderr
    assert "Traceback" not in done.stderr
    (report,) = json.loads(done.stdout)["traces"]  # {exit_code, outcomes, traces}
    return done.returncode, report


def _packet(tmp_path: Path, payloads: dict[str, str]) -> Path:
    """The golden failing run's packet with ``payloads`` put first in its modules."""
    from runner.reproduce.inputs import safe_extract
    from tests.support.fakes import trusted_packet

    trusted_packet(GOLDEN / "failing.jsonl", tmp_path / "p.tar.gz", state_dir=tmp_path / "state")
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    safe_extract(tmp_path / "p.tar.gz", unpacked)
    for name, payload in payloads.items():
        module = unpacked / "workflow" / f"{name}.py"
        module.write_text(payload + module.read_text())
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        for path in sorted(unpacked.rglob("*")):
            if path.is_file():
                archive.add(path, arcname=path.relative_to(unpacked).as_posix())
    return evil


def _mark(marker: Path) -> str:
    """Module code that tries to leave ``marker`` on the host and a file beside itself."""
    return (
        "import os as _o\n"
        "for _p in ("
        f"{str(marker)!r}, _o.path.join(_o.path.dirname(__file__), 'WRITTEN')):\n"
        "    try:\n"
        "        open(_p, 'w').write(str(_o.getuid()))\n"
        "    except OSError:\n"
        "        pass\n"
    )


def test_a_hostile_packet_reproduces_and_none_of_its_code_runs_on_the_host(
    tmp_path: Path, sandbox_image: str
) -> None:
    tools_mark, model_mark = tmp_path / "TOOLS", tmp_path / "MODEL"
    evil = _packet(tmp_path, {"golden_tools": _mark(tools_mark), "golden_model": _mark(model_mark)})
    work = tmp_path / "fresh"
    work.mkdir()
    code, report = _reproduce([str(evil)], work, sandbox_image)
    assert (code, report["outcome"]) == (0, "reproduced"), report
    assert not tools_mark.exists(), f"a packet's tool module ran on the host: {tools_mark}"
    assert not model_mark.exists(), "a packet's scripted model function ran on the host"
    assert not list(tmp_path.rglob("WRITTEN")), "the tool folder was writable"
    assert not list((work / "state" / "runs").glob("manifest-*")), "manifest run kept"


def test_a_module_failing_to_import_in_the_sandbox_is_refused_naming_the_entry(
    tmp_path: Path, sandbox_image: str
) -> None:
    marker = tmp_path / "MARKER"
    payload = f"open({str(marker)!r}, 'w').write('ran')\n"  # no such folder in the sandbox
    evil = _packet(tmp_path, {"golden_tools": payload})
    work = tmp_path / "fresh"
    work.mkdir()
    code, report = _reproduce([str(evil)], work, sandbox_image)
    assert (code, report["outcome"]) == (5, "refused"), report
    assert not marker.exists()
    assert "golden.yaml:5: tools[0]: cannot import tool module 'golden_tools'" in report["reason"]
    assert "FileNotFoundError" in report["reason"]


def _project(tmp_path: Path, extra: dict[str, str]) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("golden.yaml", "golden_tools.py", "golden_model.py"):
        shutil.copy(GOLDEN / name, project / name)
    for name, text in extra.items():
        (project / f"{name}.py").write_text(text)
    modules = ", ".join(["golden_tools", *extra])
    workflow = project / "changed.yaml"
    text = (GOLDEN / "golden.yaml").read_text()
    workflow.write_text(text.replace("[golden_tools]", f"[{modules}]"))
    return workflow


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        (
            "from runner.sdk import Effect, tool\n\n\n@tool('ticket.fetch', effect=Effect.READ)\n"
            "def again(ticket_id: str) -> str:\n    return ticket_id\n",
            # locations relative to the current directory, as the host import said them
            "tool id 'ticket.fetch' is defined twice: project/golden_tools.py:30 and "
            "project/extra_tools.py:4",
        ),
        (
            "x = 1\ndef (:\n",
            "tools[1]: cannot import tool module 'extra_tools': syntax error in "
            "{project}/extra_tools.py:2",
        ),
        (
            "import not_in_the_image_xyz\n",
            "it imports 'not_in_the_image_xyz', which is not installed in the sandbox image",
        ),
        ("import time\ntime.sleep(600)\n", "did not answer within 8 s"),
    ],
    ids=["duplicate-id", "syntax-error", "missing-dependency", "hangs"],
)
def test_problems_inside_the_sandbox_are_refused_with_file_and_line(
    tmp_path: Path, sandbox_image: str, module: str, expected: str
) -> None:
    workflow = _project(tmp_path, {"extra_tools": module})
    args = ["--workflow", str(workflow), str(GOLDEN / "failing.jsonl")]
    code, report = _reproduce(args, tmp_path, sandbox_image, SANDBOX_REPLAY_TIMEOUT_S="8")
    assert (code, report["outcome"]) == (5, "refused"), report
    assert expected.format(project=workflow.parent) in report["reason"], report["reason"]
