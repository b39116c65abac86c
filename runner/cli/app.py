"""The typer `app` of ``sandbox-replay``, its global options and the helpers every command uses.

Each command lives in its own module under ``runner.cli.commands`` and registers itself on `app`
(importing `app` from here); `runner.cli.entry.main` imports the invoked command's module
(`runner.cli.commands.register`) and runs `app`. This module imports no command. Heavy
libraries (docker, pydantic-settings, rich) are imported inside the commands, for start-up
speed: ``--help`` stays quick.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn, cast

import typer
from typer._click.exceptions import ClickException  # typer 0.29 vendors click (pinned)
from typer._click.globals import get_current_context

from runner import __version__
from runner.cli.render.terminal import echo
from runner.errors import SandboxReplayError

if TYPE_CHECKING:
    from runner.settings import Settings

app = typer.Typer(
    name="sandbox-replay",
    help="Re-run AI-agent tasks in Docker sandboxes with no network and unsafe tools denied.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # ``-h`` as ``--help`` on every command: click contexts inherit this from their parent
    context_settings={"help_option_names": ["-h", "--help"]},
)

# The options of `_main_options` that take a value (``--log-format json``): what
# `runner.cli.commands.command_name` skips to find the command's name before typer parses the
# line (tests/unit/cli/test_cli_lazy.py pins it against the callback's parameters).
GLOBAL_OPTIONS_WITH_VALUE = ("--log-format", "--log-level")


@dataclass
class CliState:
    """Options shared by every command (set by the top-level callback).

    Attributes:
        log_format: ``--log-format``, or None (the setting's, default ``auto``).
        log_level: ``--log-level``, or None.
        verbose: how many ``-v`` were given (1: info events, 2 or more: debug events).
    """

    log_format: Literal["auto", "console", "json"] | None = None
    log_level: Literal["debug", "info", "warning", "error"] | None = None
    verbose: int = 0

    def settings(self, *, deferred: bool = False) -> Settings:
        """Build the settings once, from the environment and the global flags.

        Logging is configured here too. Its level is, first found: ``--log-level``, ``-v``
        (info) or ``-vv`` (debug), ``SANDBOX_REPLAY_LOG_LEVEL``, else ``warning`` (the
        setting's default): info events are off unless asked for, so that the lines a
        command prints (a verdict, a table, a progress bar) are not buried under log lines
        in a terminal or a CI log. Log lines always go to stderr (`runner.cli.log`).

        Args:
            deferred: when the environment sets no setting, return a stand-in that builds
                them on first use (`runner.cli.lazysettings`: ``check`` needs them only for
                an MCP server or a model provider); else they are built and validated now.

        Raises:
            InputError: an environment variable holds an invalid value (named, with the
                reason), exit 2 -- never a traceback.
        """
        # imported on use, not at module top: start-up speed (`--help`, `check`)
        from runner.cli.lazysettings import (
            DEFAULT_LOG_FORMAT,
            DEFAULT_LOG_LEVEL,
            DeferredSettings,
            environment_sets_any,
        )
        from runner.cli.log import configure_logging
        from runner.hostlog import LEVELS

        if deferred and not environment_sets_any():
            level = self.log_level or self._verbose_level() or DEFAULT_LOG_LEVEL
            configure_logging(self.log_format or DEFAULT_LOG_FORMAT, LEVELS[level])
            return cast("Settings", DeferredSettings(self._build))
        settings = self._build()  # --log-level is in it: the flag wins over the environment
        level = self.log_level or self._verbose_level() or settings.log_level
        configure_logging(settings.log_format, LEVELS[level])
        return settings

    def _verbose_level(self) -> Literal["debug", "info"] | None:
        """The level ``-v`` asks for (``-vv``: debug), or None without ``-v``."""
        if self.verbose >= 2:
            return "debug"
        return "info" if self.verbose == 1 else None

    def _build(self) -> Settings:
        """`Settings` from the environment and the global flags (InputError: see `settings`)."""
        # imported on use, not at module top: start-up speed (`--help`, `check`)
        from pydantic import ValidationError

        from runner.errors import InputError
        from runner.settings import Settings

        overrides: dict[str, str] = {}
        if self.log_format:
            overrides["log_format"] = self.log_format
        if self.log_level:
            overrides["log_level"] = self.log_level
        try:
            return Settings(**overrides)  # type: ignore[arg-type]
        except ValidationError as exc:
            first = exc.errors()[0]
            name = "SANDBOX_REPLAY_" + str(first["loc"][0] if first["loc"] else "?").upper()
            raise InputError(
                f"{first['msg']} (got {first.get('input')!r})", file="environment", field=name
            ) from exc


def _version(value: bool) -> None:
    if value:
        echo(f"sandbox-replay {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main_options(
    ctx: typer.Context,
    log_format: Annotated[
        str | None,
        typer.Option(
            "--log-format", help="auto (console on a TTY, JSON otherwise), console or json."
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            help="debug, info, warning or error (default: warning; info events are shown"
            " with -v or this option).",
        ),
    ] = None,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            show_default=False,
            help="Show info log events on stderr (-vv: debug events too).",
        ),
    ] = 0,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    if log_format not in (None, "auto", "console", "json"):
        raise typer.BadParameter("must be auto, console or json", param_hint="--log-format")
    if log_level not in (None, "debug", "info", "warning", "error"):
        raise typer.BadParameter("must be debug, info, warning or error", param_hint="--log-level")
    ctx.obj = CliState(log_format=log_format, log_level=log_level, verbose=verbose)  # type: ignore[arg-type]


def state(ctx: typer.Context) -> CliState:
    """The `CliState` of the current invocation."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, CliState) else CliState()


def json_asked(args: Sequence[str] | None = None) -> bool:
    """Whether this invocation asked for ``--json``: the one rule of where an error is said.

    While a command runs: its parsed ``--json`` option (the ``as_json`` parameter every
    command declares it as, `runner.cli.options.JsonOption`); a command without one never
    asked. Outside a command (`runner.cli.entry.main` after it ended, or a usage error, which
    comes before any command runs): ``--json`` among the command-line arguments.

    Args:
        args: the arguments after the program's name; None: ``sys.argv[1:]``. Read only
            when no command is running.
    """
    ctx = get_current_context(silent=True)
    if ctx is not None:
        return bool(ctx.params.get("as_json"))
    return "--json" in (sys.argv[1:] if args is None else args)


def fail(error: SandboxReplayError, *, as_json: bool | None = None) -> NoReturn:
    """Say ``error`` and exit with its code: the one error output of every command.

    Args:
        error: what went wrong (its message and fields come from input: printed inert).
        as_json: one JSON object on stdout, ``{"exit_code", "error", **error.fields}`` (a
            field that is not JSON as its string); else one ``error:`` line on stderr. None
            (default, what a command passes): `json_asked`.
    """
    say_error(error, as_json=json_asked() if as_json is None else as_json)
    raise typer.Exit(error.exit_code)


def say_error(error: SandboxReplayError | ClickException, *, as_json: bool) -> None:
    """Print ``error`` as `fail` does: a JSON object on stdout, else an ``error:`` line on stderr.

    A usage error (typer's vendored ``ClickException``: an unknown option, a missing
    argument) has exit code 2 and no fields.
    """
    if isinstance(error, ClickException):
        text, code, fields = error.format_message(), 2, {}
    else:
        text, code, fields = str(error), error.exit_code, error.fields
    if as_json:
        body = {"exit_code": code, "error": text, **fields}
        echo(json.dumps(body, ensure_ascii=True, default=str))
    else:
        echo(f"error: {text}", err=True)
