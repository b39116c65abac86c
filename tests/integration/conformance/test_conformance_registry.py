"""Every backend class of `runner.backends` is in the conformance suite's list or exempt by name.

No engine needed: the backend modules are imported and each concrete `Backend` subclass defined
under ``runner.backends`` must be named in `BACKENDS` (the suite runs it) or in `EXEMPT` (it is
not a sandbox, and the list says why). The unsandboxed process backend of ``record`` is exempt
explicitly, never by being left out.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import runner.backends
from runner.backends.base import Backend
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from tests.integration.conformance.backends import BACKENDS, EXEMPT


def _backend_classes() -> list[type[Backend]]:
    for info in pkgutil.walk_packages(runner.backends.__path__, "runner.backends."):
        importlib.import_module(info.name)
    found: list[type[Backend]] = []
    pending: list[type[Backend]] = [Backend]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("runner.backends.") and not inspect.isabstract(sub):
                found.append(sub)
    return found


def test_every_backend_is_in_the_suite_or_exempt_by_name() -> None:
    classes = _backend_classes()
    assert classes, "no backend class found under runner.backends"
    suite = {entry.name for entry in BACKENDS}
    assert not suite & set(EXEMPT), suite & set(EXEMPT)
    missing = sorted(
        f"{c.__module__}.{c.__qualname__} ({c.name})"
        for c in classes
        if c.name not in suite | set(EXEMPT)
    )
    assert missing == [], f"add these to BACKENDS (or, if not a sandbox, EXEMPT): {missing}"
    assert sorted(suite) == sorted({e.name for e in BACKENDS}), "one entry per backend"
    assert len(suite) == len(BACKENDS)


def test_the_unsandboxed_process_backend_is_exempt_explicitly() -> None:
    assert UnsandboxedProcessBackend in _backend_classes()
    assert EXEMPT.get(UnsandboxedProcessBackend.name)
    assert UnsandboxedProcessBackend.name not in {entry.name for entry in BACKENDS}
    assert "docker" in {entry.name for entry in BACKENDS}  # the suite runs a real sandbox
