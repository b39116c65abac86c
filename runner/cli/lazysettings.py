"""Settings built on first use when the environment sets none of them (start-up speed: ``check``).

`runner.settings.Settings` reads ``SANDBOX_REPLAY_<FIELD>`` variables (case-insensitive, no
``.env`` file, no secrets folder) and validates them; importing pydantic-settings costs ~0.1 s
here (it loads asyncio, its cloud sources), a third of the time budget of ``check``. When
no variable names a field, every value is its default or a global flag's: nothing can fail
validation and nothing needs reading now. `CliState.settings` (``deferred=True``, ``check``)
then returns `DeferredSettings`, which builds the real `Settings` on its first attribute read
(a workflow with an MCP server or an ``openai`` model); with any such variable set the
settings are built and validated at once, as for every other command (a bad value: exit 2).
This is no cache: nothing outlives the process.

``tests/unit/cli/test_cli_lazysettings.py`` pins `FIELDS` and `ENV_PREFIX` against `Settings`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from runner.settings import Settings

__all__ = ["ENV_PREFIX", "FIELDS", "DeferredSettings", "environment_sets_any"]

ENV_PREFIX = "SANDBOX_REPLAY_"
# The fields of `runner.settings.Settings` (each read from ENV_PREFIX + its name).
FIELDS = frozenset(
    {
        "anthropic_api_key",
        "anthropic_base_url",
        "backend",
        "base_image",
        "cache_dir",
        "concurrency",
        "cpus",
        "docker_host",
        "host_files",
        "image",
        "log_format",
        "log_level",
        "max_calls",
        "max_trace_mb",
        "memory_mb",
        "namespace_rootfs",
        "namespace_start",
        "offline_base_image",
        "openai_api_key",
        "openai_base_url",
        "openai_model",
        "pids_limit",
        "pool",
        "pool_idle_s",
        "realdata_dir",
        "runtime",
        "state_dir",
        "timeout_s",
        "tmpfs_mb",
    }
)
# What `Settings` holds when the environment sets none of its fields.
DEFAULT_LOG_FORMAT: Literal["auto"] = "auto"
DEFAULT_LOG_LEVEL: Literal["warning"] = "warning"


def environment_sets_any(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a variable of ``environ`` (default `os.environ`) names a field of `Settings`.

    Args:
        environ: the environment to look at.

    Returns:
        True if some ``SANDBOX_REPLAY_<FIELD>`` is set, in any letter case (pydantic-settings
        matches names case-insensitively), even to an empty string.
    """
    env = os.environ if environ is None else environ
    prefix = ENV_PREFIX.lower()
    for key in env:
        name = key.lower()
        if name.startswith(prefix) and name[len(prefix) :] in FIELDS:
            return True
    return False


class DeferredSettings:
    """Stands for `Settings` and builds them on the first attribute read.

    Args:
        build: makes the `Settings` (`CliState`'s constructor with the global flags); called
            once.
    """

    def __init__(self, build: Callable[[], Settings]) -> None:
        self._build = build
        self._built: Settings | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy/pickle probes: not settings
            raise AttributeError(name)
        if self._built is None:
            self._built = self._build()
        return getattr(self._built, name)
