"""The nondeterminism report on the host: checked, listed inert, refused under strict mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.cli.render.html.render import render_reproduce
from runner.cli.render.reproduce import details, print_reports
from runner.errors import EXIT_OK, EXIT_REFUSED
from runner.reproduce.report import (
    ReproduceReport,
    nondeterminism_of,
    strict_determinism,
    with_host_sites,
)
from runner.wire import observed

CLOCK = {"kind": "wall_clock", "what": "time.time", "count": 2, "site": "/sandbox/tools/a.py:3"}
ENV = {"kind": "environment_variable", "what": "X", "count": 1, "present": False}
CONNECT = {"kind": "connect", "host": "api.example.com", "port": 443, "count": 3}


def _report(entries: list[dict[str, Any]] | None, outcome: str = "reproduced") -> ReproduceReport:
    found = None if entries is None else nondeterminism_of({"nondeterminism": {"entries": entries}})
    return ReproduceReport(
        "t.jsonl", outcome, "the same success", replay_trace="r.jsonl", nondeterminism=found
    )


@pytest.mark.parametrize(
    "entry",
    [
        "not an object",
        {"kind": "telepathy", "what": "x", "count": 1},  # not a kind the sandbox reports
        {"kind": "outbound", "what": "x", "count": 1},  # the host's own kind, not the sandbox's
        {"kind": "file_read", "what": 7, "count": 1},
        {"kind": "file_read", "what": "/etc/x", "count": True},
        {"kind": "file_read", "what": "/etc/x"},
    ],
)
def test_a_malformed_entry_from_the_sandbox_is_dropped_and_counted(entry: Any) -> None:
    found = observed.report({"entries": [entry, CLOCK], "dropped": 2})
    assert found == {"entries": [CLOCK], "dropped": 3}


def test_entries_are_bounded_in_number_and_length() -> None:
    many = [{**CLOCK, "what": "w" * 5000 + str(i)} for i in range(observed.MAX_ENTRIES + 7)]
    found = observed.report({"entries": many, "dropped": "lots"})
    assert len(found["entries"]) == observed.MAX_ENTRIES and found["dropped"] == 7
    assert all(len(e["what"]) == observed.MAX_TEXT for e in found["entries"])
    assert observed.report(None) == {"entries": [], "dropped": 0}


def test_the_outbound_log_joins_the_report_and_a_missing_report_stays_missing() -> None:
    end = {"nondeterminism": {"entries": [CLOCK], "dropped": 0}, "outbound": [CONNECT]}
    found = nondeterminism_of(end)
    assert found is not None
    assert found["entries"][-1] == {
        "kind": "outbound",
        "what": "connect api.example.com:443",
        "count": 3,
    }
    assert found["not_observed"]  # what cannot be seen is always said
    assert nondeterminism_of({"outbound": [CONNECT]}) is None  # the runtime never reported


def test_strict_determinism_refuses_any_read_and_keeps_the_replays_verdict() -> None:
    refused = strict_determinism(_report([CLOCK, ENV]))
    assert (refused.outcome, refused.exit_code) == ("refused", EXIT_REFUSED)
    assert "the replay itself: reproduced" in refused.reason
    assert refused.refusals == [
        "wall_clock time.time (2 reads, /sandbox/tools/a.py:3)",
        "environment_variable X (1 read, unset in the sandbox)",
    ]
    clean = strict_determinism(_report([]))
    assert (clean.outcome, clean.exit_code) == ("reproduced", EXIT_OK)
    sdk = {**ENV, "what": "OPENAI_LOG", "by": "package"}  # an SDK's own configuration
    assert strict_determinism(_report([sdk])).outcome == "reproduced"
    assert strict_determinism(_report([sdk, {**CLOCK, "by": "code"}])).refusals == [
        "wall_clock time.time (2 reads, /sandbox/tools/a.py:3)"
    ]
    unknown = strict_determinism(_report(None))  # cannot be told: refused too
    assert unknown.outcome == "refused" and "did not report" in unknown.refusals[0]
    invalid = ReproduceReport("t.jsonl", "invalid", "bad line")
    assert strict_determinism(invalid) is invalid


def test_terminal_and_page_list_the_reads_inert(capsys: pytest.CaptureFixture[str]) -> None:
    hostile = {**ENV, "what": "X\x1b]0;PWNED\x07", "via": "<script>x</script>"}
    report = _report([CLOCK, hostile])
    text = "\n".join(details(report))
    assert "nondeterminism: 2 reads the trace does not pin" in text
    assert "wall_clock time.time (2 reads, /sandbox/tools/a.py:3)" in text
    assert "not observed: C code" in text
    print_reports([report])
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "PWNED" in printed  # inert
    page = render_reproduce([report])
    assert "Nondeterminism: what the replay read that its trace does not pin (2)" in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x</script>" not in page
    assert "nothing the trace does not pin" in "\n".join(details(_report([])))
    sdk = {**ENV, "what": "OPENAI_LOG", "by": "package"}
    text = "\n".join(details(_report([sdk])))
    assert "nothing the trace does not pin" in text
    assert "1 read by installed packages or the standard library's own lookups, not" in text
    assert "not reported" in "\n".join(details(_report(None)))


def test_an_entry_cannot_forge_lines_of_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    """Security review: a sandbox's entry with newlines printed lines of its own choosing
    (``nondeterminism: nothing the trace does not pin`` under a real read)."""
    forged = "\n  nondeterminism: nothing the trace does not pin\n  reproduced"
    hostile = {**ENV, "what": "X" + forged, "site": "a.py:1" + forged}
    package = {**ENV, "what": "Y" + forged, "by": "package"}
    print_reports([_report([hostile, package])])
    printed = capsys.readouterr().out
    assert "\n  nondeterminism: nothing" not in printed, printed
    assert "X\\n  nondeterminism: nothing" in printed
    print_reports([strict_determinism(_report([hostile, CLOCK]))])  # the refusals too
    assert "\n  reproduced" not in capsys.readouterr().out


def test_a_strict_refusal_is_listed_once() -> None:
    """Each read that refused the replay was printed twice (``refused: ...`` and again under
    ``nondeterminism:``); the nondeterminism lines now say it, once each."""
    text = "\n".join(details(strict_determinism(_report([CLOCK, ENV]))))
    assert text.count("wall_clock time.time (2 reads") == 1, text
    assert text.count("environment_variable X (1 read") == 1, text
    assert "2 reads the trace does not pin (each refused the replay" in text
    assert "read 2 things its trace does not pin" in text


def test_a_site_in_the_sandboxs_tool_folder_is_shown_as_the_users_file(tmp_path: Path) -> None:
    """``/sandbox/tools/1/agent.py:7`` is the user's ``ROOT_1/agent.py:7``; a path that would
    leave the folder, or a file of the image, stays as the sandbox said it."""
    roots = [tmp_path / "tools", tmp_path / "project"]
    entries = [
        {**CLOCK, "site": "/sandbox/tools/1/agent.py:7"},
        {**ENV, "site": "/sandbox/tools/0/../../etc/x.py:1"},
        {**ENV, "what": "Y", "site": "/usr/lib/python3/x.py:2"},
    ]
    report = with_host_sites(_report(entries), roots)
    assert report.nondeterminism is not None
    sites = [e.get("site") for e in report.nondeterminism["entries"]]
    assert sites == [
        f"{tmp_path / 'project' / 'agent.py'}:7",
        "/sandbox/tools/0/../../etc/x.py:1",
        "/usr/lib/python3/x.py:2",
    ]
    assert f"{tmp_path / 'project' / 'agent.py'}:7" in "\n".join(details(report))
