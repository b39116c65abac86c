"""`runner.cli.app.json_asked`: the one rule of whether an error is said as JSON.

Inside a command its parsed ``--json`` decides (not the raw line); outside one (``main``, a
usage error) the arguments do. ``fail`` and ``main`` both ask it.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from typer.testing import CliRunner

from runner.cli.app import fail, json_asked
from runner.cli.options import JsonOption
from runner.errors import InputError


def _app() -> tuple[typer.Typer, list[bool]]:
    seen: list[bool] = []
    app = typer.Typer()

    @app.command("with-json")
    def with_json(as_json: JsonOption = False) -> None:
        seen.append(json_asked(["--json"]))  # the parsed option wins over the line given
        fail(InputError("bad input", file="t.yaml"))

    @app.command("without-json")
    def without_json(value: Annotated[str, typer.Option("--value")] = "") -> None:
        seen.append(json_asked(["--json"]))

    return app, seen


def test_outside_a_command_the_arguments_decide() -> None:
    assert json_asked(["report", "j1", "--json"]) is True
    assert json_asked(["report", "j1"]) is False
    assert json_asked(["--log-format", "json", "report"]) is False  # a value, not the flag


def test_inside_a_command_its_parsed_option_decides_and_fail_says_json() -> None:
    app, seen = _app()
    result = CliRunner().invoke(app, ["with-json", "--json"])
    assert seen == [True] and result.exit_code == 2
    body = json.loads(result.stdout)
    assert body == {"exit_code": 2, "error": "t.yaml: bad input", "file": "t.yaml"}


def test_inside_a_command_without_the_option_fail_says_one_error_line() -> None:
    app, seen = _app()
    result = CliRunner().invoke(app, ["with-json"])
    assert seen == [False] and result.exit_code == 2
    assert result.stdout == "" and result.stderr == "error: t.yaml: bad input\n"


def test_a_command_that_has_no_json_option_never_asked_whatever_the_line() -> None:
    app, seen = _app()
    result = CliRunner().invoke(app, ["without-json", "--value", "--json"])
    assert result.exit_code == 0 and seen == [False]
