"""reproduce without Docker: the verdict rules, refusals, inputs, packets' safe extraction,
JUnit, and the CLI's guarantees (a missing trace fails at once and creates nothing)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.backends.base import SandboxSpec
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.errors import InfrastructureError, InputError
from runner.reproduce.diff import first_difference, verdict
from runner.reproduce.envdiff import environment_diff
from runner.reproduce.inputs import expand_inputs, safe_extract
from runner.reproduce.report import ReproduceReport
from runner.reproduce.reproducer import Reproducer
from runner.settings import Settings
from runner.trace.format import failure_signature
from tests.support.paths import TESTS

GOLDEN = TESTS / "fixtures" / "golden"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


class _ManifestOnly(UnsandboxedProcessBackend):
    """Describes the (trusted) fixture tools in a local process; refuses to start an episode."""

    def sandbox(self, spec: SandboxSpec) -> Any:
        assert spec.run_id.startswith("manifest-"), "a refused trace must not start a sandbox"
        return super().sandbox(spec)


def _reproducer(tmp_path: Path, **kwargs: Any) -> Reproducer:
    # The registry is built by a sandbox (runner/admission/describe.py): here a local
    # process stands in for it, and nothing else may start.
    return Reproducer(
        Settings(state_dir=tmp_path / "state"), backend_factory=_ManifestOnly, **kwargs
    )


CALLS = [
    {"index": 0, "tool": "ticket.get", "args": {"id": "T"}},
    {"index": 1, "tool": "model", "request": {"messages": []}},
    {"index": 2, "tool": "text.sum", "args": {"a": 1}},
]
END = {"status": "failed", "failure_signature": "s1", "failure": {"call_index": 2}}


def test_the_same_signature_and_calls_is_reproduced() -> None:
    assert verdict(CALLS, END, CALLS, dict(END))[0] == "reproduced"
    ok = {"status": "succeeded", "output": 1}
    assert verdict(CALLS, ok, CALLS, {"status": "succeeded", "output": 1})[0] == "reproduced"
    outcome, difference, reason = verdict(CALLS, ok, CALLS, {"status": "succeeded", "output": 2})
    assert (outcome, difference) == ("not_reproduced", None) and "another output" in reason


def test_a_recorded_end_without_a_signature_compares_by_its_failure_fields() -> None:
    failure = {"call_index": 2, "tool": "text.sum", "error_class": "KeyError", "exit_code": 1}
    recorded = {"status": "failed", "exit_code": 1, "failure": failure}  # signature optional
    replayed = {
        "status": "failed",
        "exit_code": 1,
        "failure": dict(failure),
        "failure_signature": failure_signature(2, "text.sum", "KeyError", 1),
    }
    assert verdict(CALLS, recorded, CALLS, replayed)[0] == "reproduced"
    other = dict(replayed, failure_signature=failure_signature(2, "text.sum", "ValueError", 1))
    assert verdict(CALLS, recorded, CALLS, other)[0] == "not_reproduced"


def test_the_first_difference_is_the_earliest_call_whatever_found_it() -> None:
    replayed = [
        CALLS[0],
        dict(
            CALLS[1],
            error={
                "class": "ReplayDivergence",
                "message": "model turn 0 (call 1) differs from its recording: first "
                'differing message index 0: request has {"x"}, recording has {"y"}',
            },
        ),
        dict(CALLS[2], args={"a": 2}),
    ]
    divergences = [{"kind": "pure_result", "index": 2, "tool": "text.sum", "message": "m"}]
    first = first_difference(CALLS, replayed, divergences)
    assert first is not None
    assert (first["index"], first["tool"], first["message_index"]) == (1, "model", 0)
    assert "message 0 differs" in first["summary"] and '{"x"}' in first["differs"]
    missing = first_difference(CALLS, CALLS[:2], [])
    assert missing is not None and (missing["index"], missing["kind"]) == (2, "not_called")
    outcome, _, reason = verdict(
        CALLS, END, CALLS[:2], {"status": "failed", "failure_signature": "s2"}
    )
    assert outcome == "not_reproduced" and "call #2 text.sum" in reason


def test_environment_diff_names_python_packages_tools_workflow_and_model() -> None:
    then = {"python": "3.11.7", "packages": {"a": "1", "b": "2"}, "tools": {"x": "h1", "y": "h"}}
    now = {"python": "3.11.2", "packages": {"a": "1", "c": "3"}, "tools": {"x": "h2", "y": "h"}}
    diff = environment_diff(
        then,
        now,
        "w1",
        "w2",
        [{"tool": "model", "model": "m-1"}],
        [{"tool": "model", "model": "m-2"}],
    )
    fields = {d["field"]: d for d in diff}
    assert set(fields) == {"python", "workflow.hash", "model", "tools.x", "packages"}
    assert fields["packages"]["only_recorded"] == 1 and fields["packages"]["only_now"] == 1
    assert environment_diff(then, then, "w", "w", [], []) == []


def test_a_call_with_no_response_at_all_is_refused(tmp_path: Path) -> None:
    lines = _lines(GOLDEN / "failing.jsonl")
    for key in ("body", "body_encoding"):
        lines[3].pop(key)
    trace = _write(tmp_path / "t.jsonl", lines)
    report = _reproducer(tmp_path, workflow=GOLDEN / "golden.yaml").reproduce(trace)
    assert (report.outcome, report.exit_code) == ("refused", 5)
    assert "call #2 (kb.lookup) has no response at all" in report.reason


def test_an_unknown_version_a_missing_end_and_a_missing_tool_are_refused(tmp_path: Path) -> None:
    lines = _lines(GOLDEN / "failing.jsonl")
    future = [dict(line, v=2) for line in lines]
    report = _reproducer(tmp_path).reproduce(_write(tmp_path / "v2.jsonl", future))
    assert report.outcome == "refused" and "version 2" in report.reason
    report = _reproducer(tmp_path, workflow=GOLDEN / "golden.yaml").reproduce(
        _write(tmp_path / "noend.jsonl", lines[:-1])
    )
    assert report.outcome == "refused" and "end" in report.reason
    renamed = [
        dict(line, tool="kb.gone") if line.get("tool") == "kb.lookup" else line for line in lines
    ]
    report = _reproducer(tmp_path, workflow=GOLDEN / "golden.yaml").reproduce(
        _write(tmp_path / "gone.jsonl", renamed)
    )
    assert report.outcome == "refused"
    assert "'kb.gone' (call #2) is missing from today's registry" in report.reason


def test_a_changed_schema_hash_is_refused_a_model_alias_is_not(tmp_path: Path) -> None:
    lines = _lines(GOLDEN / "failing.jsonl")
    lines[3]["schema_hash"] = "0" * 64
    report = _reproducer(tmp_path, workflow=GOLDEN / "golden.yaml").reproduce(
        _write(tmp_path / "schema.jsonl", lines)
    )
    assert report.outcome == "refused" and "'kb.lookup' changed its schema" in report.reason
    lines = _lines(GOLDEN / "failing.jsonl")
    lines[2]["model"] = "gpt-4o"  # an alias: lint flags it, reproduce still starts

    def broken() -> Any:
        raise InfrastructureError("engine down")

    reproducer = Reproducer(
        Settings(state_dir=tmp_path / "s2"), backend_factory=broken, workflow=GOLDEN / "golden.yaml"
    )
    report = reproducer.reproduce(_write(tmp_path / "alias.jsonl", lines))
    assert (report.outcome, report.exit_code) == ("infra_error", 6)  # it got as far as Docker


def test_malformed_trace_is_invalid_input_naming_file_and_line(tmp_path: Path) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"v": 1, "type": "run"}\n', encoding="utf-8")
    report = _reproducer(tmp_path).reproduce(trace)
    assert (report.outcome, report.exit_code) == ("invalid", 2)
    assert "bad.jsonl:1" in report.reason


def test_missing_inputs_fail_at_once_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.cli.app import app
    from runner.cli.commands import reproduce  # noqa: F401 - registers the command

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["reproduce", str(GOLDEN / "failing.jsonl"), "missing.jsonl"])
    assert result.exit_code == 2 and "missing.jsonl: no such trace" in result.output
    assert sorted(tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="no traces"):
        expand_inputs([tmp_path])


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("name", ["../evil.txt", "/abs/evil.txt", "ok/../../evil.txt"])
def test_packet_extraction_refuses_paths_that_leave_it(tmp_path: Path, name: str) -> None:
    packet = _tar(tmp_path / "p.tar.gz", [(tarfile.TarInfo(name), b"x")])
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match="leaves the packet"):
        safe_extract(packet, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists() and list((tmp_path / "out").iterdir()) == []


def test_packet_extraction_refuses_links(tmp_path: Path) -> None:
    link = tarfile.TarInfo("trace.jsonl")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    packet = _tar(tmp_path / "p.tar.gz", [(link, b"")])
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match="links and special files"):
        safe_extract(packet, tmp_path / "out")
    report = _reproducer(tmp_path).reproduce(packet)
    assert report.outcome == "invalid"


def test_junit_has_one_case_per_trace(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ElementTree

    from runner.cli.render.reproduce import write_junit

    reports = [
        ReproduceReport("a.jsonl", "reproduced", "same"),
        ReproduceReport("b.jsonl", "not_reproduced", "differs"),
        ReproduceReport("c.jsonl", "refused", "schema"),
    ]
    write_junit(reports, tmp_path / "j.xml")
    suite = ElementTree.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "3"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["a.jsonl", "b.jsonl", "c.jsonl"]
    assert [(c.find("failure") is not None, c.find("error") is not None) for c in cases] == [
        (False, False),
        (True, False),
        (False, True),
    ]
