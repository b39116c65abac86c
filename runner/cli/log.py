"""Logging setup: structlog, readable on a terminal, JSON when not a TTY or when asked.

Modules log with ``runner.hostlog.get_logger(__name__)`` and snake_case event names with fields.
Logs go to stderr so that stdout stays for command output (tables, ``--json``). Field values
quote hostile input (error messages, host names, stderr of sandboxes): JSON logs escape them
(``ensure_ascii``), console logs print them `runner.cli.render.terminal.inert`.

structlog is imported when the first line is logged, not here (start-up speed: ``check``
logs nothing on success): `configure_logging` configures it at once when it is loaded already,
else through `runner.hostlog.configure_on_first_use`.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Literal

from runner.cli.render.terminal import inert
from runner.hostlog import LEVELS, configure_on_first_use

if TYPE_CHECKING:
    import structlog


def _encodable(value: object) -> object:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates (undecodable bytes): escape, never crash
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, bytes | bytearray):
        return repr(bytes(value))
    return value


def _safe_text(
    _logger: object, _method: str, event_dict: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """Make every top-level value printable: payloads may carry lone surrogates or bytes."""
    return {key: _encodable(value) for key, value in event_dict.items()}


def _inert_text(
    _logger: object, _method: str, event_dict: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """Console logs: every string value (and the event name) without terminal controls."""
    return {
        key: inert(value) if isinstance(value, str) else value for key, value in event_dict.items()
    }


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    import structlog  # loaded already: this runs when a line is logged

    return structlog.PrintLogger(file=sys.stderr)


def configure_logging(
    fmt: Literal["auto", "console", "json"] = "auto", level: int = LEVELS["info"]
) -> None:
    """Configure structlog once for the process.

    Args:
        fmt: ``console`` (human), ``json`` (one object a line) or ``auto`` (console on a TTY).
        level: minimum level, a `logging` number (`runner.hostlog.LEVELS`).
    """
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    configure = functools.partial(_configure, use_json, sys.stderr.isatty(), level)
    if "structlog" in sys.modules:
        configure()
    else:  # applied when the first line is logged (the terminal is the one seen now)
        configure_on_first_use(level, configure)


def _configure(use_json: bool, colors: bool, level: int) -> None:
    # imported on use, not at module top: start-up speed (`check` logs nothing on success)
    import structlog

    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(ensure_ascii=True)
        if use_json
        else structlog.dev.ConsoleRenderer(colors=colors)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _safe_text,
            *([] if use_json else [_inert_text]),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Resolve sys.stderr at each use, not once: test runners and CliRunner swap it.
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
