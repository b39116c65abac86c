"""``sandbox-replay view``: the page of a trace or a job on 127.0.0.1, until Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from runner.cli.commands.view import _latest_job
from runner.errors import InputError
from tests.support.cli import sigint_as_default

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "examples" / "helpdesk" / "traces" / "failing.jsonl"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_REPLAY")}
    env["SANDBOX_REPLAY_STATE_DIR"] = str(state)
    return env


def test_view_serves_a_trace_on_loopback_until_interrupted(tmp_path: Path) -> None:
    view = subprocess.Popen(
        [*CLI, "view", str(TRACE)],
        env=_env(tmp_path / "state"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_default,
    )
    try:
        assert view.stdout is not None
        line = view.stdout.readline()
        assert line.startswith("serving on http://127.0.0.1:"), line + view.stderr.read()
        url = line.split()[2]
        page = httpx.get(url, timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert "ticket-1000" in page.text and "KeyError" in page.text
        assert page.headers["x-content-type-options"] == "nosniff"
        data = page.text.split('id="report-data">', 1)[1].split("</script>", 1)[0]
        assert json.loads(data)["episodes"]["0"]["calls_total"] >= 2
    finally:
        view.send_signal(signal.SIGINT)
        assert view.wait(10) == 130


def test_view_without_a_job_or_trace_is_invalid_input(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "view"], env=_env(tmp_path / "state"), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "no job with a report" in proc.stderr
    proc = subprocess.run(
        [*CLI, "view", "job-none"],
        env=_env(tmp_path / "state"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "no job 'job-none'" in proc.stderr


def test_the_latest_job_is_the_newest_report(tmp_path: Path) -> None:
    for name, mtime in (("job-a", 100), ("job-b", 300), ("job-c", 200)):
        (tmp_path / name).mkdir()
        report = tmp_path / name / "report.json"
        report.write_text("{}")
        os.utime(report, (mtime, mtime))
    (tmp_path / "job-d").mkdir()  # no report: not a candidate
    assert _latest_job(tmp_path) == "job-b"
    with pytest.raises(InputError):
        _latest_job(tmp_path / "nothing")
