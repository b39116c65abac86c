"""Special files, bad bytes and hostile JSON in user files: exit 2 naming the file, never a
hang, never a traceback (items 4, 7, 13 and 15).

Commands that meet a special or oversized file run as a subprocess with a wall-clock bound and
an address-space limit, so the old behaviour (a FIFO read for ever, ``/dev/zero`` read until
memory ran out) fails the test instead of the machine; the others run in-process. No Docker:
the engine address points at a socket that does not exist.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
HELPDESK = ROOT / "tests" / "fixtures" / "helpdesk"
SUBMIT = ROOT / "tests" / "fixtures" / "submit"
NO_ENGINE = {"SANDBOX_REPLAY_DOCKER_HOST": "unix:///nonexistent/sandbox-replay-test.sock"}
BOUND_S = 60


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    two_gib = 2 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (two_gib, two_gib))


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, cwd: Path) -> Ran:
    """Run the CLI in this process (typer's runner) in ``cwd``; an exception is a traceback."""
    import traceback

    from typer.testing import CliRunner

    from runner.cli.app import app

    previous = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner(env=NO_ENGINE).invoke(app, list(args))
    finally:
        os.chdir(previous)
    crashed = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crashed = "Traceback\n" + "".join(traceback.format_exception(result.exception))
    return Ran(result.exit_code, result.stdout, result.stderr + crashed)


def cli_isolated(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a bounded child: a hang past `BOUND_S` fails the test, memory is capped."""
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        cwd=cwd,
        env={**os.environ, **NO_ENGINE, "PYTHONPATH": str(ROOT)},
        preexec_fn=_limit_memory,
        check=False,
    )


def _input_error(proc: Ran | subprocess.CompletedProcess[str], *names: str) -> str:
    """Exit 2, no traceback, and the message names the file (one of ``names``)."""
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output[-3000:]
    assert proc.returncode == 2, (proc.returncode, output[-2000:])
    assert any(name in output for name in names), output[-2000:]
    return output


def _golden_lines() -> list[dict[str, Any]]:
    return [json.loads(x) for x in (GOLDEN / "failing.jsonl").read_text().splitlines()]


def _write_trace(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


# --- item 7: special files are refused, never read --------------------------------------------


@pytest.fixture
def specials(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    fifo_yaml = tmp_path / "pipe.yaml"
    os.mkfifo(fifo_yaml)
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    zero_tasks = tmp_path / "zero.jsonl"
    zero_tasks.symlink_to("/dev/zero")
    return {"fifo": fifo, "fifo_yaml": fifo_yaml, "zero": zero, "zero_tasks": zero_tasks}


@pytest.mark.parametrize(
    ("args", "special"),
    [
        (("check", "{zero}"), "zero"),
        (("check", "{fifo_yaml}"), "fifo_yaml"),
        (("check", "--policy", "{fifo_yaml}", str(HELPDESK / "safe.yaml")), "fifo_yaml"),
        (("submit", "--dry-run", "--variant", "{zero}", "--tasks", "{fifo}"), "zero"),
        (("submit", "--dry-run", "--variant", str(SUBMIT / "a.yaml"), "--tasks", "{fifo}"), "fifo"),
        (
            ("submit", "--dry-run", "--variant", str(SUBMIT / "a.yaml"), "--tasks", "{zero_tasks}"),
            "zero_tasks",
        ),
        (("lint", "{fifo}"), "fifo"),
        (("import", "openai-messages", "{fifo}", "--out", "out"), "fifo"),
        (("import", "tau2", "{fifo}", "--out", "out"), "fifo"),
        (("import", "otel", "{fifo}", "--out", "out"), "fifo"),
    ],
    ids=[
        "check-dev-zero",
        "check-fifo",
        "policy-fifo",
        "submit-workflow-dev-zero",
        "submit-tasks-fifo",
        "submit-tasks-dev-zero",
        "lint-fifo",
        "import-openai-fifo",
        "import-tau2-fifo",
        "import-otel-fifo",
    ],
)
def test_special_files_are_refused_at_once(
    tmp_path: Path, specials: dict[str, Path], args: tuple[str, ...], special: str
) -> None:
    argv = [a.format(**{k: str(v) for k, v in specials.items()}) for a in args]
    proc = cli_isolated(*argv, cwd=tmp_path)
    # submit resolves its paths (a job can be resumed from elsewhere): the link's target
    output = _input_error(proc, specials[special].name, str(specials[special].resolve()))
    assert "not a regular file" in output, output[-1000:]


def test_a_workflow_over_the_size_limit_is_refused_without_reading_it(tmp_path: Path) -> None:
    from runner.inputfile import LIMITS

    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(LIMITS["workflow"] + 1)  # sparse: costs no disk
    output = _input_error(cli_isolated("check", str(big), cwd=tmp_path), "big.yaml")
    assert f"larger than {LIMITS['workflow']} bytes" in output


def test_the_reader_refuses_a_file_that_grows_past_its_limit(tmp_path: Path) -> None:
    from runner.errors import InputError
    from runner.inputfile import LIMITS, open_input

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"x\n")
    with open_input(path, "workflow") as stream:
        with open(path, "ab") as grow:
            grow.truncate(LIMITS["workflow"] + 10)
        with pytest.raises(InputError, match="larger than"):
            stream.read()


# --- item 13: bad bytes and non-finite numbers are input errors -------------------------------


def test_a_nul_byte_in_a_workflow_is_an_input_error_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "nul.yaml"
    path.write_bytes((HELPDESK / "safe.yaml").read_bytes().replace(b"name: ", b"name: \x00", 1))
    output = _input_error(cli("check", str(path), cwd=tmp_path), "nul.yaml:")
    assert "U+0000" in output


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("timeout_s: 300", "timeout_s: .inf", "limits.timeout_s"),
        ("memory_mb: 512", "memory_mb: -.inf", "limits.memory_mb"),
        ("usd: 10.0", "usd: .inf", "ceilings.replay.usd"),
        ("tokens: 2000000", "tokens: .nan", "ceilings.judge.tokens"),
        ("sandbox_s: 7200", "sandbox_s: 1.0e+400", "ceilings.replay.sandbox_s"),
    ],
)
def test_non_finite_numbers_in_a_policy_are_input_errors(
    tmp_path: Path, old: str, new: str, field: str
) -> None:
    text = (ROOT / "policies" / "shadow.yaml").read_text()
    assert old in text
    policy = tmp_path / "p.yaml"
    policy.write_text(text.replace(old, new, 1))
    proc = cli("check", "--policy", str(policy), str(HELPDESK / "safe.yaml"), cwd=tmp_path)
    output = _input_error(proc, "p.yaml:")
    assert field in output and "not a finite number" in output, output[-1000:]


# --- item 4: JSON nested too deeply in traces and tasks ---------------------------------------


def test_trace_call_arguments_nested_300_deep_are_invalid_input_everywhere(
    tmp_path: Path,
) -> None:
    """lint accepted them; tasks extract and reproduce crashed in pydantic's serializer."""
    lines = _golden_lines()
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    lines[1]["args"] = {"a": deep}
    _write_trace(tmp_path / "deep.jsonl", lines)
    for args in (
        ("lint", "deep.jsonl"),
        ("tasks", "extract", "deep.jsonl", "-o", "t.jsonl"),
        ("packet", "deep.jsonl", "-o", "p.tar.gz"),
        ("reproduce", "deep.jsonl"),
    ):
        output = _input_error(cli(*args, cwd=tmp_path), "deep.jsonl:2")
        assert "nested too deeply" in output, (args, output[-1000:])
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "p.tar.gz").exists()


def test_a_task_line_nested_300_deep_is_invalid_input(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"task_id": "t1", "input": {"x": ' + "[" * 300 + "]" * 300 + "}}\n"
        '{"task_id": "t2", "input": {"x": 1e400}}\n'
    )
    proc = cli("submit", "--dry-run", "--variant", str(SUBMIT / "a.yaml"), "--tasks", "tasks.jsonl",
               cwd=tmp_path)  # fmt: skip
    output = _input_error(proc, "tasks.jsonl:1")
    assert "nested too deeply (more than 100 levels)" in output
    from runner.domain.tasks import load_tasks

    errors = [str(e) for e in load_tasks(tasks).errors]
    assert len(errors) == 2 and "tasks.jsonl:2: invalid JSON: 1e400 is not JSON" in errors[1]


# --- item 15: packet and tasks extract judge traces as lint does ------------------------------


def test_an_unknown_trace_version_is_invalid_input_for_packet_and_extract(tmp_path: Path) -> None:
    lines = _golden_lines()
    for line in lines:
        line["v"] = 2
    _write_trace(tmp_path / "v2.jsonl", lines)
    for args in (("tasks", "extract", "v2.jsonl", "-o", "t.jsonl"), ("packet", "v2.jsonl", "-o",
                 "p.tar.gz")):  # fmt: skip
        output = _input_error(cli(*args, cwd=tmp_path), "v2.jsonl:1")
        assert "version 2 is not supported" in output
    refused = cli("reproduce", "v2.jsonl", cwd=tmp_path)  # SPEC: reproduce says refused
    assert refused.returncode == 5 and "Traceback" not in refused.stderr


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"body_encoding": "base64", "body": "!!not base64"}, "body"),
        ({"truncated": True}, "body"),
        ({"schema_hash": "0" * 64}, "schema_hash"),
    ],
    ids=["bad-base64", "truncated-without-hash", "schema-hash-differs"],
)
def test_packet_and_extract_refuse_what_lint_calls_malformed(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    lines = _golden_lines()
    target = next(x for x in lines if x.get("tool") == "kb.lookup")
    target.update(change)
    _write_trace(tmp_path / "bad.jsonl", lines)
    linted = cli("lint", "--json", "bad.jsonl", cwd=tmp_path)
    assert linted.returncode == 1 and '"malformed"' in linted.stdout  # lint's verdict
    line = f"bad.jsonl:{lines.index(target) + 1}: {field}:"
    for args in (
        ("tasks", "extract", "bad.jsonl", "-o", "t.jsonl"),
        ("packet", "bad.jsonl", "-o", "p.tar.gz", "--workflow", str(GOLDEN / "golden.yaml")),
    ):
        output = _input_error(cli(*args, cwd=tmp_path), line)
        assert "malformed" in output
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "p.tar.gz").exists()


def test_a_well_formed_trace_still_packs_and_extracts(tmp_path: Path) -> None:
    """Control for the two tests above: the golden trace passes both commands' checks."""
    lines = _golden_lines()
    _write_trace(tmp_path / "ok.jsonl", lines)
    extracted = cli("tasks", "extract", "ok.jsonl", "-o", "t.jsonl", cwd=tmp_path)
    assert extracted.returncode == 0, extracted.stderr
    packed = cli("packet", "ok.jsonl", "-o", "p.tar.gz", "--workflow", str(GOLDEN / "golden.yaml"),
                 cwd=tmp_path)  # fmt: skip
    # past every input check, packet asks an engine to describe the tools (none here: 6)
    assert packed.returncode == 6 and "Docker engine not reachable" in packed.stderr, packed
