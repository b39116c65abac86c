"""Without Docker: hostile text reaches no terminal through the real CLI.

The commands run as subprocesses (``sandbox-replay`` exactly as a user runs it, stdout and
stderr piped) on files carrying `HOSTILE`: clear screen, colours, an OSC title, a C1 CSI, bidi
overrides and isolates, zero-width characters, a BOM, a line separator, CR, BS, NUL, rich
markup and an emoji code. The oracle is independent of the code under test: `unsafe_in`
lists every character of the output whose Unicode category is a control (but tab and
newline), a format character, a line or paragraph separator or a surrogate. Each test also
checks that the hostile field was printed (shown as escapes), so a test cannot pass by
printing nothing. The sandboxed paths (submit, reproduce, run) are in
tests/integration/test_terminal_inert.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from runner.cli.render.terminal import inert
from tests.support.paths import REPO

ROOT = REPO
FIX = ROOT / "tests" / "fixtures"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]

HOSTILE = (
    "\x1b[2J\x1b[31mRED\x1b]0;pwned-title\x07\x9b1m\u202egnp.exe\u2066iso\u2069"
    "\u200bzw\ufeffbom\u2028ls\u00adshy\r\x08\x00[bold]B[/bold]:warning:"
)
SHOWN = "\\x1b[2J"  # how the clear-screen sequence prints once inert


def unsafe_in(text: str) -> list[str]:
    """Code points a terminal could act on (or hide), by Unicode category, sorted."""
    bad = {
        f"U+{ord(c):04X}"
        for c in text
        if c not in "\t\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")
    }
    return sorted(bad)


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_REPLAY")}
    environment.update(env or {})
    environment.setdefault("SANDBOX_REPLAY_STATE_DIR", str(cwd / "state"))
    done = subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        timeout=120,
        check=False,
    )
    out = done.stdout.decode("utf-8", "surrogateescape")
    err = done.stderr.decode("utf-8", "surrogateescape")
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def assert_inert(done: subprocess.CompletedProcess[str]) -> None:
    assert unsafe_in(done.stdout) == [], done.stdout[-3000:]
    assert unsafe_in(done.stderr) == [], done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


# --- the function ------------------------------------------------------------------------------


def test_inert_escapes_exactly_what_a_terminal_could_act_on_for_every_code_point() -> None:
    for code in range(0x110000):
        char = chr(code)
        dangerous = char not in "\t\n" and unicodedata.category(char) in (
            "Cc",
            "Cf",
            "Zl",
            "Zp",
            "Cs",
        )
        shown = inert(char)
        if dangerous:
            assert shown != char and unsafe_in(shown) == [], hex(code)
        elif unicodedata.category(char) != "Cn":  # unassigned here, Cf in a newer Unicode
            assert shown == char, hex(code)


def test_inert_shows_what_it_escaped_and_keeps_the_rest() -> None:
    assert inert("a\tb\nc") == "a\tb\nc"
    assert inert("\x1b[2J") == "\\x1b[2J" and inert("\x9b") == "\\x9b"
    assert inert("\u202e\u2066\u200b\ufeff") == "\\u202e\\u2066\\u200b\\ufeff"
    assert inert("\U000e0041") == "\\U000e0041"  # a tag character
    assert inert("\udcff") == "\\udcff"  # a lone surrogate: printable after this
    assert inert("grüße 日本 🎉 [bold]") == "grüße 日本 🎉 [bold]"
    assert inert(inert(HOSTILE)) == inert(HOSTILE)  # idempotent
    assert inert(42) == "42"


def test_every_cli_module_prints_through_the_inert_function() -> None:
    """The one mechanism: no ``typer.echo`` and no bare rich ``Console`` outside it."""
    offenders = []
    for path in sorted((ROOT / "runner" / "cli").rglob("*.py")):
        if path.name in ("terminal.py", "console.py"):
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ("typer.echo(", "Console(", "sys.stdout.write(", "sys.stderr.write("):
            if needle in text:
                offenders.append(f"{path.name}: {needle}")
        if re.search(r"(?<![.\w])print\(", text):
            offenders.append(f"{path.name}: print(")
    assert offenders == []


# --- the commands, on hostile files -----------------------------------------------------------


def _hostile_trace(tmp_path: Path) -> Path:
    """The golden failing trace with hostile model ids, arguments, error messages and bodies."""
    lines = [json.loads(x) for x in (FIX / "golden" / "failing.jsonl").read_text().splitlines()]
    for line in lines:
        if line["type"] == "call":
            if line.get("tool") == "model":
                line["model"] = "gpt-4o" + HOSTILE
            if "args" in line:
                line["args"] = {"q": HOSTILE}
            if "error" in line:
                line["error"]["message"] = HOSTILE
        if line["type"] == "end":
            line["reason"] = HOSTILE
            line["outbound"] = [{"kind": "dns", "host": HOSTILE, "port": 443, "count": 1}]
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_lint_table_and_json_are_inert(tmp_path: Path) -> None:
    trace = _hostile_trace(tmp_path)
    table = cli("lint", str(trace), cwd=tmp_path)
    assert table.returncode in (0, 1), table.stderr
    assert_inert(table)
    assert "gpt-4o\\x1b[2J" in table.stdout  # the hostile model id, shown
    assert "[bold]B[/bold]" in table.stdout  # data markup printed as text, not rendered
    as_json = cli("lint", "--json", str(trace), cwd=tmp_path)
    assert_inert(as_json)
    assert json.loads(as_json.stdout)["traces"][0]["file"] == str(trace)


def test_tasks_extract_output_and_errors_are_inert(tmp_path: Path) -> None:
    trace = _hostile_trace(tmp_path)
    lines = trace.read_text().splitlines()
    head = json.loads(lines[0])
    head["task_id"] = "gold\u202e1"  # an id that is refused: the error quotes it
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    done = cli("tasks", "extract", str(bad), "-o", str(tmp_path / "t.jsonl"), cwd=tmp_path)
    assert done.returncode == 2
    assert_inert(done)
    assert "gold\\u202e1" in done.stderr, done.stderr
    ok = cli("tasks", "extract", "--all", str(trace), "-o", str(tmp_path / "t.jsonl"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert_inert(ok)


def test_import_report_is_inert(tmp_path: Path) -> None:
    conversation = {
        "id": "conv-1",
        "model": "gpt-4o" + HOSTILE,
        "tools": [{"type": "function", "function": {"name": "send_mail", "description": HOSTILE}}],
        "messages": [
            {"role": "user", "content": HOSTILE},
            {
                "role": "assistant",
                "content": HOSTILE,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "send_mail", "arguments": json.dumps({"to": HOSTILE})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": HOSTILE},
            {"role": "assistant", "content": HOSTILE},
        ],
    }
    source = tmp_path / "chat.jsonl"
    source.write_text(json.dumps(conversation) + "\n")
    for extra in ([], ["--json"]):
        out = tmp_path / f"out{len(extra)}"
        done = cli(
            "import", "openai-messages", str(source), "--out", str(out), *extra, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        assert_inert(done)


def _report(job_id: str) -> dict[str, Any]:
    zero = {"runs": 0, "tokens_in": 0, "tokens_out": 0, "usd": 0.0, "sandbox_s": 0.0}
    return {
        "job_id": job_id,
        "status": "ceiling_reached" + HOSTILE,
        "exit_code": 4,
        "plan": {"formula": "2 variants x 2 tasks = 4 runs" + HOSTILE},
        "ceilings": {"replay": {"runs": {"value": 3, "source": HOSTILE}}},
        "ceiling_reached": {"message": HOSTILE},
        "spend": {HOSTILE: {"charged": {**zero, "runs": 3}, "model_calls": 0}},
        "runs_by_status": {HOSTILE: 1, "succeeded": 3},
        "grading": {
            "judge": HOSTILE,
            "variants": [
                {
                    "variant": "v" + HOSTILE,
                    "rating": {"mu": 27.0, "sigma": 8.0, "ordinal": 3.0},
                    "mean_rank": 1.0,
                    "versus": {"a": {"wins": 1, "ties": 0, "losses": 0}},
                    "episodes_by_status": {HOSTILE: 2},
                },
            ],
            "tasks": [
                {
                    "task_id": "t" + HOSTILE,
                    "ranking": [{"variant": "v" + HOSTILE, "rank": 1, "score": 0.5}],
                    "detail": {"reasons": {"v" + HOSTILE: [HOSTILE]}},
                }
            ],
            "ungraded": [{"task_id": "t" + HOSTILE, "reason": HOSTILE}],
        },
        "unrecorded": {
            "v" + HOSTILE: {
                "count": 1,
                "calls": [
                    {"task_id": HOSTILE, "index": 0, "tool": HOSTILE, "args": {"q": HOSTILE}}
                ],
            }
        },
        "not_run": [{"variant": HOSTILE, "task_id": HOSTILE, "reason": HOSTILE}],
        "stopped_by_ceiling": [{"variant": HOSTILE, "task_id": HOSTILE}],
    }


def test_report_tables_are_inert_and_data_markup_stays_text(tmp_path: Path) -> None:
    job = tmp_path / "state" / "jobs" / "job-1"
    job.mkdir(parents=True)
    (job / "report.json").write_text(json.dumps(_report("job-1")))
    done = cli("report", "job-1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_inert(done)
    assert SHOWN in done.stdout and "[bold]B[/bold]" in done.stdout
    assert ":warning:" in done.stdout and "⚠" not in done.stdout  # no emoji codes either
    as_json = cli("report", "job-1", "--json", cwd=tmp_path)
    assert_inert(as_json)
    assert json.loads(as_json.stdout)["plan"]["formula"].endswith(HOSTILE)  # data unchanged


@pytest.mark.parametrize("command", [["ledger", "--job"], ["report"], ["submit", "--resume"]])
def test_error_messages_quoting_hostile_arguments_are_inert(
    tmp_path: Path, command: list[str]
) -> None:
    done = cli(*command, "job" + HOSTILE.replace("\x00", ""), cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert_inert(done)
    assert "\\x1b" in done.stderr or "\\x1b" in done.stdout


def test_console_logs_are_inert(tmp_path: Path) -> None:
    """A log line quoting hostile text (here: a workflow path) prints inert on a console log."""
    workflow = tmp_path / ("wf" + HOSTILE.replace("\x00", "").replace("/", "") + ".yaml")
    done = cli(
        "--log-format",
        "console",
        "--log-level",
        "debug",
        "check",
        str(workflow),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert_inert(done)
