"""Content hashes of text inputs do not depend on line endings (a simulated Windows).

A checkout by Git for Windows (``core.autocrlf=true``) gives every text file CRLF endings. The
workflow hash of a trace's ``run`` line must be the same for that checkout as for the file the
trace was recorded from on Linux, or ``reproduce`` cannot find the workflow (it was refused,
exit 5). The policy hash (canonical JSON of the parsed policy) and the tool schema hashes (of
the schema read from the source) never depended on the bytes; they are pinned here too.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from runner.domain.workflow import load_workflow
from runner.importers.toolset import content_hash
from runner.policy import load_policy
from runner.reproduce.inputs import find_workflow_file
from runner.sdk import record
from runner.tools.static import static_registry
from runner.trace.format import text_hash
from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"


def crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def crlf_copy(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(crlf(source.read_text(encoding="utf-8")).encode("utf-8"))
    return target


def test_text_hash_ignores_line_endings_and_keeps_the_lf_files_hash() -> None:
    lf = "name: x\nsteps: []\n"
    assert text_hash(lf) == hashlib.sha256(lf.encode()).hexdigest()  # the rule before
    assert text_hash(crlf(lf)) == text_hash(lf) == text_hash(lf.replace("\n", "\r"))
    assert text_hash(lf) != text_hash(lf + "\n")  # content still counts
    assert content_hash(crlf(lf)) == text_hash(lf)  # the importers write the same hash


def test_a_crlf_workflow_has_the_hash_of_its_lf_original(tmp_path: Path) -> None:
    lf = load_workflow(HELPDESK / "v1.yaml")
    windows = load_workflow(crlf_copy(HELPDESK / "v1.yaml", tmp_path / "v1.yaml"))
    assert b"\r\n" in (tmp_path / "v1.yaml").read_bytes()
    assert windows.content_hash == lf.content_hash
    assert windows.normalised() == lf.normalised()


def test_reproduce_finds_the_workflow_of_a_linux_trace_in_a_crlf_checkout(tmp_path: Path) -> None:
    first = json.loads((HELPDESK / "traces" / "failing.jsonl").read_text().splitlines()[0])
    recorded_hash = first["workflow"]["hash"]
    for name in ("v1.yaml", "v2.yaml", "v3.yaml"):
        crlf_copy(HELPDESK / name, tmp_path / "project" / name)
    trace = crlf_copy(HELPDESK / "traces" / "failing.jsonl", tmp_path / "project" / "traces" / "t")
    found = find_workflow_file(trace, recorded_hash, [])
    assert found is not None and found.parent == tmp_path / "project"
    assert load_workflow(found).content_hash == recorded_hash


def test_a_trace_recorded_from_a_crlf_file_by_its_bytes_hash_still_finds_it(tmp_path: Path) -> None:
    workflow = crlf_copy(HELPDESK / "v1.yaml", tmp_path / "v1.yaml")
    old_hash = hashlib.sha256(workflow.read_bytes()).hexdigest()  # the exact bytes
    trace = tmp_path / "traces" / "old.jsonl"
    trace.parent.mkdir()
    trace.write_text("")
    assert find_workflow_file(trace, old_hash, []) == workflow


def test_record_writes_the_lf_hash_for_a_crlf_workflow(tmp_path: Path) -> None:
    workflow = crlf_copy(HELPDESK / "v1.yaml", tmp_path / "v1.yaml")
    out = tmp_path / "trace.jsonl"
    with record(str(out), task_id="t1", task_input={}, workflow=str(workflow)):
        pass
    run = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert run["workflow"]["hash"] == load_workflow(HELPDESK / "v1.yaml").content_hash


def test_policy_and_tool_schema_hashes_do_not_see_line_endings(tmp_path: Path) -> None:
    policy = REPO / "policies" / "shadow.yaml"
    assert (
        load_policy(str(crlf_copy(policy, tmp_path / "shadow.yaml"))).hash
        == load_policy(str(policy)).hash
    )
    project = tmp_path / "project"
    shutil.copytree(HELPDESK, project)
    for path in project.glob("*.py"):
        crlf_copy(path, path)
    assert b"\r\n" in (project / "helpdesk_tools.py").read_bytes()
    windows = static_registry(load_workflow(project / "v1.yaml"))
    linux = static_registry(load_workflow(HELPDESK / "v1.yaml"))
    assert {t.id: t.schema_hash for t in windows} == {t.id: t.schema_hash for t in linux}
    assert all(t.schema_hash for t in linux)
