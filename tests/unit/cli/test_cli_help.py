"""Every command's ``--help`` as a terminal user reads it (runner/cli/helpstyle.py): value names
instead of type tags, usage without ``{name}``, paragraphs that flow, no RST markup."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from runner.cli.app import app

_NOISE = re.compile(r"<(bool|str|int|float|path|list\[[^>]*\]|[a-z]+ range)>|\[x[<>]=|``")


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for name, command in getattr(group, "commands", {}).items():
        found.extend(_commands(command, (*prefix, name)))
    return found


COMMANDS = _commands(typer.main.get_command(app))


def _help(*path: str) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_walked() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"", "run", "check", "submit", "image build", "tasks extract", "import tau2"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "top")
def test_help_has_no_type_tags_braces_or_rst(path: tuple[str, ...]) -> None:
    text = _help(*path)
    assert not _NOISE.search(text), _NOISE.search(text)
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage


def test_value_names_and_flags() -> None:
    text = _help("run")
    assert "Usage: sandbox-replay run [OPTIONS] WORKFLOW" in text
    assert re.search(r"--tasks\s+FILE\s", text) and re.search(r"--task\s+ID\s", text)
    assert re.search(r"--json\s+One JSON object", text)  # a flag shows no value
    assert "CHECK" not in _help("check") and "WORKFLOWS..." in _help("check")
    assert "[JOB_FILE]" in _help("submit")


def test_paragraphs_flow_instead_of_breaking_at_the_sources_line_ends() -> None:
    text = " ".join(_help("check").split())  # rich pads lines; compare the words
    assert "its effect class and the policy rule" in text
    lines = _help("check").splitlines()
    assert not any(line.rstrip().endswith("its effect") for line in lines), lines


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "top")
def test_dash_h_is_help_on_every_command(path: tuple[str, ...]) -> None:
    """``-h`` prints what ``--help`` prints (it was refused: "No such option: -h")."""
    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert result.output == _help(*path)
