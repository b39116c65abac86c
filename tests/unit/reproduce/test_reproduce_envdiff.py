"""reproduce's environment diff: what matters is named, the rest of the packages is one line.

A trace recorded on a host lists the host virtualenv's packages; the replay lists the sandbox
image's. That difference is large and says nothing, unless a package is on both sides with
another version or the tool modules import it.
"""

from __future__ import annotations

from pathlib import Path

from runner.cli.render.reproduce import details
from runner.reproduce.envdiff import environment_diff, packages_diff, tool_imports
from runner.reproduce.report import ReproduceReport

HOST_VENV = {
    "PyYAML": "6.0.4",
    "pydantic_settings": "2.16.3",
    "requests": "2.34.2",
    **{f"dev-tool-{i}": "1.0" for i in range(40)},
}
SANDBOX = {"PyYAML": "6.0.1", "pydantic-settings": "2.16.3", "chardet": "4.0.0"}


def test_dozens_of_host_only_packages_are_one_summary_line() -> None:
    diff = packages_diff(HOST_VENV, SANDBOX)
    named = {d["field"]: d for d in diff if d["field"] != "packages"}
    # on both sides with another version: named; pydantic_settings == pydantic-settings: same
    assert named == {
        "packages.PyYAML": {
            "field": "packages.PyYAML",
            "recorded": "6.0.4",
            "now": "6.0.1",
            "why": "on both sides",
        }
    }
    (summary,) = [d for d in diff if d["field"] == "packages"]
    assert summary["only_recorded"] == 41 and summary["only_now"] == 1  # 40 dev tools + requests
    assert summary["recorded"] == "43 packages" and summary["now"] == "3 packages"
    assert "41 only in the recording, 1 only in the replay" in summary["summary"]


def test_a_package_the_tools_import_is_named_even_when_one_side_lacks_it() -> None:
    diff = packages_diff(HOST_VENV, SANDBOX, imports={"requests", "yaml", "PyYAML"})
    fields = {d["field"]: d for d in diff}
    assert fields["packages.requests"] == {
        "field": "packages.requests",
        "recorded": "2.34.2",
        "now": None,
        "why": "imported by the tools",
    }
    assert fields["packages.PyYAML"]["why"] == "imported by the tools"
    assert fields["packages"]["only_recorded"] == 40  # requests is no longer in the summary


def test_the_same_packages_under_other_spellings_are_no_difference() -> None:
    assert packages_diff({"Typing_Extensions": "4.16.0"}, {"typing-extensions": "4.16.0"}) == []
    assert packages_diff({}, {}) == [] and packages_diff(None, None) == []


def test_environment_diff_passes_the_tool_imports_through() -> None:
    env_then = {"python": "3.11.7", "packages": HOST_VENV, "tools": {"t": "h"}}
    env_now = {"python": "3.11.7", "packages": SANDBOX, "tools": {"t": "h"}}
    diff = environment_diff(env_then, env_now, "w", "w", [], [], imports={"requests"})
    assert [d["field"] for d in diff] == ["packages.PyYAML", "packages.requests", "packages"]


def test_tool_imports_read_the_modules_without_running_them(tmp_path: Path) -> None:
    module = tmp_path / "tools_mod.py"
    module.write_text(
        "import os, json.decoder\n"
        "from yaml import safe_load\n"
        "from . import sibling\n"
        "def f():\n"
        "    import requests.adapters\n"
        "raise SystemExit('never run')\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")
    found = tool_imports([module, tmp_path / "broken.py", tmp_path / "missing.py"])
    assert {"os", "json", "yaml", "requests"} <= found
    assert "sibling" not in found and "" not in found
    assert "PyYAML" in found  # the host's distribution providing `yaml`


def test_the_cli_prints_the_summary_in_one_line_and_names_what_matters() -> None:
    diff = packages_diff(HOST_VENV, SANDBOX, imports={"requests"})
    report = ReproduceReport("t.jsonl", "not_reproduced", "differs", environment_diff=diff)
    lines = [line for line in details(report) if "packages" in line]
    assert lines == [
        "    packages.PyYAML: 6.0.4 -> 6.0.1 (on both sides)",
        "    packages.requests: 2.34.2 -> absent (imported by the tools)",
        "    other packages, none imported by the tool modules: the recording's environment had"
        " 43 packages installed, the sandbox image has 3 packages (40 only in the recording, 1"
        " only in the sandbox; expected, not a fault)",
    ]
    # an image with the standard library only: said so (was: "lists its own (0)")
    diff = packages_diff(HOST_VENV, {}, imports=set())
    said = details(ReproduceReport("t.jsonl", "not_reproduced", "x", environment_diff=diff))
    (line,) = [line for line in said if "other packages" in line]
    assert "the sandbox image has none but the standard library (43 only in" in line
