"""The host's loggers: structlog, imported on the first line actually logged (start-up speed).

Every host module logs through ``log = get_logger(__name__)`` at its top and calls
``log.info("snake_case_event", field=value)`` (also ``debug``, ``warning``, ``error``,
``exception``); the returned `HostLogger` imports structlog and binds
``structlog.get_logger(name)`` (structlog's own lazy proxy) on its first call that logs, so a
command that logs nothing (``check`` of an eligible workflow, ``--help``) never imports
structlog, nor the part of rich that ``structlog.dev`` loads (~0.2 s here).

`runner.cli.log.configure_logging` configures structlog once per process. When structlog is
not imported yet it hands its configuration to `configure_on_first_use` instead: the
configuration is applied just before the first line is logged, and until then a call below the
configured level returns at once (what the filtering logger it configures would do with it),
without importing structlog. Loggers made before the configuration follow it: they hold no
configuration of their own (structlog's proxy reads it at each call, the project does not cache
loggers on first use).

In-sandbox packages (`runner.runtime`, `runner.sdk`, `runner.trace`, `runner.errors`) do not
log with structlog and never import this module.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

__all__ = ["LEVELS", "HostLogger", "configure_on_first_use", "get_logger"]

# Level name -> the `logging` module's number for it (logging.DEBUG ... logging.ERROR; the
# numbers structlog filters by), spelled here so that `check` need not import logging (~10 M
# instructions); tests/unit/test_hostlog.py pins them against logging's.
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
_METHOD_LEVELS = {**LEVELS, "exception": LEVELS["error"]}


class _Pending:
    """The configuration waiting for structlog's import: its level and how to apply it."""

    level: int | None = None
    apply: Callable[[], None] | None = None


_pending = _Pending()
_lock = threading.Lock()


def configure_on_first_use(level: int, apply: Callable[[], None]) -> None:
    """Apply a structlog configuration when the first line is logged, not now.

    Args:
        level: the configuration's minimum level (a `logging` number, see `LEVELS`): calls
            below it are dropped without importing structlog.
        apply: configures structlog (``structlog.configure(...)``); called once, just before
            the first call at or above ``level`` logs, unless structlog was configured by
            someone else since (the later configuration wins, as it would have).
    """
    _pending.level = level
    _pending.apply = apply


def _resolve_pending() -> None:
    if _pending.apply is None:  # the usual case once configured: no lock taken
        return
    # Threads may log their first lines at once (submit's runs): one applies the configuration
    # and the others wait for it, so that no line goes out through structlog's defaults.
    with _lock:
        apply = _pending.apply
        if apply is None:
            return
        try:
            # structlog imported and configured by someone else after `configure_on_first_use`
            # (configure_logging configures at once when structlog is loaded): theirs is later
            if not ("structlog" in sys.modules and sys.modules["structlog"].is_configured()):
                apply()
        finally:
            _pending.apply = None
            _pending.level = None


class HostLogger:
    """A named logger whose structlog logger is bound on first use (see the module docstring).

    Args:
        name: the logger's name (the module's ``__name__``), passed to ``structlog.get_logger``.
    """

    __slots__ = ("_bound", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._bound: FilteringBoundLogger | None = None

    def _logger(self) -> FilteringBoundLogger:
        _resolve_pending()
        if self._bound is None:
            # imported on use, not at module top: start-up speed (`check`, `--help`)
            import structlog

            self._bound = structlog.get_logger(self._name)
        return self._bound

    def _dropped(self, method: str) -> bool:
        pending = _pending.level
        return pending is not None and _METHOD_LEVELS[method] < pending

    def debug(self, event: str, *args: Any, **kw: Any) -> None:
        """Log ``event`` with fields ``kw`` at debug level."""
        if not self._dropped("debug"):
            self._logger().debug(event, *args, **kw)

    def info(self, event: str, *args: Any, **kw: Any) -> None:
        """Log ``event`` with fields ``kw`` at info level."""
        if not self._dropped("info"):
            self._logger().info(event, *args, **kw)

    def warning(self, event: str, *args: Any, **kw: Any) -> None:
        """Log ``event`` with fields ``kw`` at warning level."""
        if not self._dropped("warning"):
            self._logger().warning(event, *args, **kw)

    def error(self, event: str, *args: Any, **kw: Any) -> None:
        """Log ``event`` with fields ``kw`` at error level."""
        if not self._dropped("error"):
            self._logger().error(event, *args, **kw)

    def exception(self, event: str, *args: Any, **kw: Any) -> None:
        """Log ``event`` at error level with the exception being handled (``exc_info``)."""
        if not self._dropped("exception"):
            self._logger().exception(event, *args, **kw)

    def bind(self, **kw: Any) -> FilteringBoundLogger:
        """The structlog logger with ``kw`` bound (imports structlog now)."""
        return self._logger().bind(**kw)


def get_logger(name: str) -> HostLogger:
    """The logger of module ``name``; structlog is imported when it first logs.

    Args:
        name: the module's ``__name__``.

    Returns:
        A `HostLogger` (cheap: nothing is imported or bound until a line is logged).
    """
    return HostLogger(name)
