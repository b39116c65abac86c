"""A package's curated names, each imported on first use (PEP 562): start-up speed.

A package ``__init__`` that imports every module it re-exports makes any import of one of its
modules load them all: ``check`` imported `runner.admission.gate` and got the
episode driver, the providers (httpx), the ledger (sqlite3) and pydantic-settings with it, for
nothing. A package whose surface is heavy declares it instead with `lazy_exports`::

    if TYPE_CHECKING:  # the names for mypy and import-linter; loaded on first use at run time
        from runner.episode.driver import run_episode

    __all__ = ["run_episode"]
    __getattr__, __dir__ = lazy_exports(__name__, {"run_episode": "runner.episode.driver"})

``from runner.episode import run_episode`` then imports `runner.episode.driver` at that
moment, and caches the name in the package. ``tests/unit/test_public_surface.py`` resolves every
name of every ``__all__``, and ``tests/unit/cli/test_cli_gate.py`` pins what ``--help`` and
``check`` leave unimported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for its lazy names.

    Args:
        package: the package's ``__name__``.
        exports: public name -> the module (absolute dotted name) that defines it.

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.

    Raises:
        AttributeError: (from ``__getattr__``) a name the package does not export.
    """
    names = dict(exports)

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
