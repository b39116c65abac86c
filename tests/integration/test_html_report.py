"""The HTML report of a real ``submit`` and ``reproduce``, in a real headless browser.

The job: tests/fixtures/html, three variants by seven tasks in real containers; one task id and
every tool result carry markup (``<script>``, ``</script>``, ``onerror=``, ``onload=``, an
entity-looking ``&lt;b&gt;``) that must show as text and never run (a window flag the markup
would set stays unset). The browser is Debian's chromium in a network namespace with no route
(tests/support/browser.py): the page loads nothing but itself, and nothing could leave the machine.
Under CI a missing chromium fails these tests (never a skip).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import Browser, browser
from tests.support.cli import sigint_as_default

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "html"
HELPDESK = ROOT / "examples" / "helpdesk"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]
HOSTILE_ID = "t9' onerror='window.__pwned=7' &lt;b&gt;x"
PAYLOAD_START = "<script>window.__pwned=1</script> </script><script>window.__pwned=2</script>"
VARIANTS = ["hostile@1", "hostile@2", "hostile@3"]


def _env(state: Path, image: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(state),
        SANDBOX_REPLAY_IMAGE=image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
    )
    return env


def _stderr_of(process: subprocess.Popen[str]) -> str:
    """The last of a finished (or killed) process's stderr, for an assertion's message."""
    if process.poll() is None:
        process.kill()
    assert process.stderr is not None
    return process.stderr.read()[-2000:]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> dict[str, Any]:
    """A real submit of the hostile fixture: its report and the page it wrote."""
    state = tmp_path_factory.mktemp("html-job") / "state"
    args = ["submit", "--json", "--tasks", "tasks.jsonl"]
    for name in ("v1.yaml", "v2.yaml", "v3.yaml"):
        args += ["--variant", name]
    proc = subprocess.run(
        [*CLI, *args],
        cwd=FIX,
        env=_env(state, sandbox_image),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    page = state / "jobs" / report["job_id"] / "report.html"
    assert f"HTML report: {page}" in proc.stderr  # submit prints where the page is
    return {"report": report, "page": page, "state": state, "image": sandbox_image}


def _texts(b: Browser, selector: str) -> list[str]:
    return list(
        b.js(
            f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
            ".map(e => e.textContent.trim())"
        )
    )


def _nothing_ran(b: Browser) -> None:
    assert b.js("typeof window.__pwned") == "undefined"
    assert b.js("document.scripts.length") == 2  # the data block and the page's own script
    assert b.js("document.querySelectorAll('[onerror], [onload], img, iframe').length") == 0
    # the score chart and the rating chart, nothing else
    assert b.js("document.querySelectorAll('svg').length") == 2


def test_job_report_in_a_real_browser(job: dict[str, Any], tmp_path: Path) -> None:
    page: Path = job["page"]
    assert page.stat().st_size < 1_000_000
    with browser(tmp_path, width=1400, height=900) as b:
        assert b.interfaces == ["lo"]  # the browser's namespace: loopback only, no route out
        load_s = b.open(page.as_uri())
        assert load_s < 10
        assert b.js("document.documentElement.getAttribute('data-ready')") == "1"

        # the first screen (1400 x 900) says who wins and each variant's mean with its interval
        verdict = job["report"]["verdict"]
        heading = _texts(b, "header.top h1")[0]
        assert heading.startswith(
            f"{verdict['winner']} wins" if verdict["winner"] else "No clear winner"
        )
        assert _texts(b, "#verdict p.headline") == [verdict["text"]]
        assert b.js("document.querySelector('#scores-table').getBoundingClientRect().bottom") < 900
        rows = _texts(b, "#scores-table tbody tr")
        for entry in job["report"]["scores"]["variants"]:
            low, high = entry["interval"]
            row = next(r for r in rows if r.startswith(entry["variant"]))
            assert f"{entry['mean']:.2f}" in row and f"[{low:.2f}, {high:.2f}]" in row
        # the ratings' internals wait in a closed details section, far below
        assert b.js("document.querySelector('details#ratings').open") is False
        assert b.js("document.querySelector('details#ratings').getBoundingClientRect().top") > 900
        b.screenshot(tmp_path / "first-screen.png")
        b.js("document.querySelector('details#ratings').open = true")

        # the ratings table lists every variant, best first
        assert sorted(_texts(b, "#ratings-table tbody td:first-child")) == VARIANTS
        assert _texts(b, "#ratings-table tbody td:first-child") == VARIANTS[::-1]
        # a click on the "mu" header sorts ascending, a second click descending
        b.click("#ratings-table thead th:nth-child(2) button")
        mus = [float(v) for v in _texts(b, "#ratings-table tbody td:nth-child(2)")]
        assert mus == sorted(mus) and len(set(mus)) == 3
        assert _texts(b, "#ratings-table tbody td:first-child") == VARIANTS
        assert b.js("document.querySelector('#ratings-table th:nth-child(2)').ariaSort") == (
            "ascending"
        )
        b.click("#ratings-table thead th:nth-child(2) button")
        mus = [float(v) for v in _texts(b, "#ratings-table tbody td:nth-child(2)")]
        assert mus == sorted(mus, reverse=True)

        # the hostile task id is text, exactly as written (the entity-looking part too)
        assert HOSTILE_ID in _texts(b, "#tasks-table tbody td:first-child")
        assert HOSTILE_ID in _texts(b, "#episodes-table tbody td:nth-child(2)")
        assert b.js(
            "Array.from(document.querySelectorAll('[data-task]'))"
            f".some(e => e.getAttribute('data-task') === {json.dumps(HOSTILE_ID)})"
        )
        _nothing_ran(b)

        # the calls of the hostile episode, rendered by the page's script: text, never markup
        n = next(i for i, p in enumerate(job["report"]["pairs"]) if p["task_id"] == HOSTILE_ID)
        b.click(f"#episode-{n} details summary")
        deadline = time.monotonic() + 5
        while not b.js(f"document.querySelectorAll('#episode-{n} .call').length"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        calls = _texts(b, f"#episode-{n} .call")
        assert len(calls) == 3
        assert "served from recording" in calls[0] and "executed" in calls[1]
        shown = _texts(b, f"#episode-{n} .call pre, #episode-{n} .call code")
        assert any(PAYLOAD_START in text for text in shown)  # the tool's output, as text
        assert any("<svg onload=" in text and "onerror=window.__pwned=6" in text for text in shown)
        _nothing_ran(b)

        # filters: one variant, then one status
        b.js(
            "(() => { const s = document.querySelector('#filters [name=variant]');"
            " s.value = 'hostile@1'; s.dispatchEvent(new Event('change')); })()"
        )
        visible = b.js(
            "Array.from(document.querySelectorAll('#episodes-table tbody tr'))"
            ".filter(r => !r.hidden).map(r => r.getAttribute('data-variant'))"
        )
        assert visible == ["hostile@1"] * 7
        assert _texts(b, "#filter-count") == ["7 of 21 episodes shown; per-task rows 7 of 21"]
        tasks = b.js(
            "Array.from(document.querySelectorAll('#tasks-table tbody tr'))"
            ".filter(r => !r.hidden).map(r => r.getAttribute('data-variant'))"
        )
        assert tasks == ["hostile@1"] * 7
        # a status no episode has: every table follows it (the per-task table did not)
        b.js(
            "(() => { const s = document.querySelector('#filters [name=status]');"
            " s.add(new Option('failed', 'failed')); s.value = 'failed';"
            " s.dispatchEvent(new Event('change')); })()"
        )
        assert _texts(b, "#filter-count") == ["0 of 21 episodes shown; per-task rows 0 of 21"]
        assert b.js("document.querySelectorAll('#tasks-table tbody tr:not([hidden])').length") == 0

        # nothing was requested but the page itself
        urls = [e["request"]["url"] for e in b.events("Network.requestWillBeSent")]
        assert urls == [page.as_uri()]
        shot = b.screenshot(tmp_path / "report.png", full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

        # with JavaScript off the summary is all there
        b.open(page.as_uri(), javascript=False)
        assert b.js("document.documentElement.getAttribute('data-ready')") is None
        assert sorted(_texts(b, "#ratings-table tbody td:first-child")) == VARIANTS
        assert _texts(b, "#verdicts ~ p.verdict")  # the verdicts in words
        assert b.js("document.querySelector('#filters').hidden") is True
        _nothing_ran(b)


def test_report_html_and_view_serve_the_same_page(job: dict[str, Any], tmp_path: Path) -> None:
    env = _env(job["state"], job["image"])
    job_id = job["report"]["job_id"]
    out = tmp_path / "again.html"
    proc = subprocess.run(
        [*CLI, "report", job_id, "--html", str(out)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == job["page"].read_text()

    view = subprocess.Popen(
        [*CLI, "view", job_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_default,
    )
    try:
        assert view.stdout is not None
        line = view.stdout.readline()
        assert line.startswith("serving on http://127.0.0.1:"), (line, _stderr_of(view))
        url = line.split()[2]
        response = httpx.get(url, timeout=10)
        assert response.status_code == 200
        assert response.text == job["page"].read_text()
        assert "default-src 'none'" in response.headers["content-security-policy"]
        assert httpx.get(url + "other", timeout=10).status_code == 404
        assert httpx.post(url, timeout=10).status_code == 405
    finally:
        view.send_signal(signal.SIGINT)
        code = view.wait(60)  # a loaded machine: the interpreter's exit may take seconds
    assert code == 130, (code, _stderr_of(view))


def test_reproduce_html_in_a_real_browser(tmp_path: Path, sandbox_image: str) -> None:
    out = tmp_path / "reproduce.html"
    proc = subprocess.run(
        [
            *CLI,
            "reproduce",
            "traces/failing.jsonl",
            "traces/incomplete.jsonl",
            "--html",
            str(out),
        ],
        cwd=HELPDESK,
        env=_env(tmp_path / "state", sandbox_image),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # the incomplete trace: not_reproduced
    with browser(tmp_path) as b:
        assert b.interfaces == ["lo"]
        b.open(out.as_uri())
        assert _texts(b, "#outcomes-table tbody td:nth-child(2)") == [
            "reproduced",
            "not_reproduced",
        ]
        # the first differing call, recorded against replayed, with the differing lines marked
        assert _texts(b, "#trace-1 table.diff thead th") == ["recorded", "replayed"]
        assert (
            b.js(
                "document.querySelectorAll('#trace-1 table.diff td.chg, #trace-1 table.diff"
                " td.del, #trace-1 table.diff td.add').length"
            )
            > 0
        )
        assert "Outbound destinations" in " ".join(_texts(b, "#trace-1 h4"))
        # the first difference's label, and what the replay read that the trace does not pin
        assert "extra_turn" in " ".join(_texts(b, "#outcomes-table tbody td:nth-child(4)"))
        assert any(t.startswith("Nondeterminism") for t in _texts(b, "#trace-1 h4"))
        assert b.js("document.querySelectorAll('[onerror], [onload]').length") == 0
        b.screenshot(tmp_path / "reproduce.png", full_page=True)
