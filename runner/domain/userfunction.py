"""The one host-side importer of a user's ``module:function`` reference.

Used for the scripted model (`runner.providers.scripted`) and the ``module:function`` judges of
`runner.grading`: the user's own host-side code, imported on the host by design. Tool code and
program steps are never imported here (they run inside a sandbox only); the sandbox side has
its own, standard-library copy for program steps (`runner.runtime.steps.program`), as it may
import nothing of the host.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner.errors import InputError

__all__ = ["load_function"]


@contextmanager
def _import_path(paths: Sequence[Path]) -> Iterator[None]:
    added = [str(p) for p in paths if str(p) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for entry in added:
            if entry in sys.path:
                sys.path.remove(entry)


def _forget_other_folders_module(module_name: str, search_paths: Sequence[Path]) -> None:
    """Drop a cached module of that name when ``search_paths`` hold another file of it.

    Two variants of one submission often name the same module (``v1/agent_model.py`` and
    ``v2/agent_model.py``): imported once per process, the second variant would silently be
    given the first one's function. The first variant keeps its function (a function holds
    its module's globals); only the cache entry (and its submodules) goes.
    """
    top = module_name.partition(".")[0]
    cached = sys.modules.get(top)
    where = getattr(cached, "__file__", None)
    if cached is None or not where or not search_paths:
        return
    spec = importlib.machinery.PathFinder.find_spec(top, [str(p) for p in search_paths])
    if spec is None or not spec.origin or Path(spec.origin).resolve() == Path(where).resolve():
        return
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]


def load_function(
    ref: str, search_paths: Sequence[Path] = (), *, field: str = "model.function"
) -> Callable[..., Any]:
    """Import ``module:func`` (``func`` may be dotted) with ``search_paths`` first on sys.path.

    Args:
        ref: ``package.module:function``.
        search_paths: folders put first on the import path while importing.
        field: the field an error names (``model.function``; ``judge`` for a judge).

    Raises:
        InputError: a malformed reference, a module that does not import, or a missing or
            non-callable attribute (the ``field`` named).

    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"{ref!r} is not 'module:function'", field=field)
    try:
        with _import_path(search_paths):
            _forget_other_folders_module(module_name, search_paths)
            target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise InputError(
            f"cannot import {module_name!r}: {exc.__class__.__name__}: {exc}",
            field=field,
        ) from None
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise InputError(f"{ref!r}: no attribute {part!r}", field=field)
    if not callable(target):
        raise InputError(f"{ref!r}: {module_name!r} has no callable {attr!r}", field=field)
    return target  # type: ignore[no-any-return]
