"""Hostile YAML the outside review (round four) fed to ``check`` and ``submit --dry-run``.

Every case is a clear input error (exit 2, file and line named), never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runner.cli.app import app
from tests.support.paths import REPO

HELPDESK = REPO / "tests" / "fixtures" / "helpdesk"
POLICY = REPO / "policies" / "shadow.yaml"


def _check(tmp_path: Path, workflow: str, policy: str | None = None) -> tuple[int, str]:
    for module in ("hd_tools.py", "hd_model.py"):
        (tmp_path / module).write_bytes((HELPDESK / module).read_bytes())
    (tmp_path / "w.yaml").write_text(workflow)
    argv = ["check", str(tmp_path / "w.yaml")]
    if policy is not None:
        (tmp_path / "p.yaml").write_text(policy)
        argv[1:1] = ["--policy", str(tmp_path / "p.yaml")]
    done = CliRunner().invoke(app, argv, catch_exceptions=True)
    assert not isinstance(done.exception, ValueError), done.exception  # no traceback
    return done.exit_code, done.output


@pytest.mark.parametrize("digits", ["9" * 5000, "-" + "1" * 4301, "1_" * 4400 + "1"])
def test_a_whole_number_past_pythons_digit_limit_in_a_workflow_names_its_line(
    tmp_path: Path, digits: str
) -> None:
    workflow = (HELPDESK / "safe.yaml").read_text().replace("max_turns: 6", f"max_turns: {digits}")
    code, output = _check(tmp_path, workflow)
    line = workflow[: workflow.index("max_turns")].count("\n") + 1
    assert code == 2, output[-500:]
    assert f"w.yaml:{line}" in output and "digits" in output, output[-500:]


def test_a_whole_number_past_pythons_digit_limit_in_a_policy_names_its_line(
    tmp_path: Path,
) -> None:
    policy = POLICY.read_text().replace("timeout_s: 300", "timeout_s: " + "9" * 5000)
    code, output = _check(tmp_path, (HELPDESK / "safe.yaml").read_text(), policy)
    line = policy[: policy.index("timeout_s")].count("\n") + 1
    assert code == 2, output[-500:]
    assert f"p.yaml:{line}" in output and "digits" in output, output[-500:]


def test_a_whole_number_past_pythons_digit_limit_as_a_key_names_its_line(tmp_path: Path) -> None:
    key = "? " + "9" * 5000 + "\n: x\n"  # an explicit key: a plain one stops at 1024 characters
    workflow = (HELPDESK / "safe.yaml").read_text().replace("steps:", key + "steps:")
    code, output = _check(tmp_path, workflow)
    line = workflow[: workflow.index("9" * 5000)].count("\n") + 1
    assert code == 2, output[-500:]
    assert f"w.yaml:{line}" in output and "digits" in output, output[-500:]


@pytest.mark.parametrize(
    ("value", "says"),
    [("2001-13-45", "month"), ('!!float "abc"', "float"), ('!!int "abc"', "int")],
)
def test_a_scalar_its_tags_constructor_refuses_names_its_line(
    tmp_path: Path, value: str, says: str
) -> None:
    workflow = (HELPDESK / "safe.yaml").read_text().replace("version: 2", f"version: {value}")
    code, output = _check(tmp_path, workflow)
    assert code == 2, output[-500:]
    assert "w.yaml:3" in output and "version" in output and says in output, output[-500:]


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_documents_are_composed_by_libyaml_not_the_pure_python_scanner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pure-Python scanner reads ~0.1 MiB/s on a loaded machine: a 1.1 MiB workflow of
    20,000 flow-style steps kept ``check`` past 30 s (review round four); libyaml ~3x faster
    at the 4 MiB limit (57 s -> 18 s, load 9). Counted by calls, not timed."""
    from runner.domain.yamlsource import load_yaml

    def python_scanner(*_: object) -> None:
        raise AssertionError("the pure-Python YAML scanner ran")

    monkeypatch.setattr(yaml.scanner.Scanner, "check_token", python_scanner)
    path = tmp_path / "w.yaml"
    path.write_text((HELPDESK / "safe.yaml").read_text())
    doc = load_yaml(path, what="workflow")
    assert doc.data["name"] == "helpdesk" and doc.line_of(("steps", 1, "agent")) == 14
