"""The CLI builds only the invoked command, and nobody can tell from its output.

`runner.cli.entry.main` imports the module of the command its line names
(`runner.cli.commands.register`); the help texts, global options before the command and
typer's "No such command" suggestions must read exactly as with every command registered.
Each case compares a fresh interpreter running `main` against one that registers every
command first (what `main` did before).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from runner.cli.app import GLOBAL_OPTIONS_WITH_VALUE, app
from runner.cli.commands import COMMANDS, command_name
from tests.support.paths import REPO

_MAIN = """
import sys
sys.argv = ["sandbox-replay", *sys.argv[1:]]
if {every}:
    from runner.cli.commands import register
    register()
from runner.cli.entry import main
main()
"""


def _cli(*args: str, every: bool) -> tuple[int, str, str]:
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _MAIN.format(every=every), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO / "examples" / "helpdesk",
        env=env,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        (),
        ("check", "--help"),
        ("image", "--help"),
        ("image", "build", "--help"),
        ("--log-level", "debug", "check", "--help"),
        ("--log-format=json", "submit", "--help"),
        ("chek", "v1.yaml"),  # unknown: typer's "No such command" and its suggestion
        ("--log-format", "json", "check", "v3.yaml", "--json"),
    ],
    ids=lambda args: " ".join(args) or "no-args",
)
def test_output_is_the_same_as_with_every_command_registered(args: tuple[str, ...]) -> None:
    assert _cli(*args, every=False) == _cli(*args, every=True)


def test_the_global_options_taking_a_value_are_the_callbacks() -> None:
    group = typer.main.get_command(app)
    with_value = {
        name
        for param in group.params
        # a flag and a counted option (``-v``, ``-vv``) take no value
        if not getattr(param, "is_flag", False) and not getattr(param, "count", False)
        for name in param.opts  # type: ignore[attr-defined]
    }
    assert with_value == set(GLOBAL_OPTIONS_WITH_VALUE)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["check", "v1.yaml"], "check"),
        (["--log-level", "debug", "check"], "check"),
        (["--log-format=json", "--log-level", "info", "submit", "x"], "submit"),
        (["--log-format", "check", "run"], "run"),  # "check" is the option's value here
        (["--help", "check"], None),  # the top-level help
        (["--version"], None),
        ([], None),
        (["image", "build"], "image"),
    ],
)
def test_command_name(args: list[str], name: str | None) -> None:
    assert command_name(args) == name


def test_every_command_is_mapped() -> None:
    """A command registered on the app but missing from COMMANDS would never be reachable."""
    group = typer.main.get_command(app)
    assert sorted(group.commands) == sorted(COMMANDS)  # type: ignore[attr-defined]


def test_each_summary_is_its_commands_first_help_paragraph_in_listing_order() -> None:
    """`--help` lists the table's summaries without importing a command: they cannot drift."""
    group = typer.main.get_command(app)
    listed = group.list_commands(typer.Context(group))  # type: ignore[attr-defined]
    assert listed == list(COMMANDS)
    for name, command in COMMANDS.items():
        real = group.get_command(typer.Context(group), name)  # type: ignore[attr-defined]
        first = (real.help or "").split("\n\n")[0].replace("\n", " ")
        assert command.summary == first, name
