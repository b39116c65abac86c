"""Every backend class is the registry's, and every registry entry is in the suite or exempt.

No engine needed: the backend modules are imported and each concrete `Backend` subclass under
``runner.backends`` (wrappers in front of another backend excepted: their sandboxes are the
inner one's) must be named by a registry entry; each entry either has conformance variants
(the suite runs them) or says why it is exempt; each entry's factory resolves, to a class of
its own name. The unsandboxed process backend of ``record`` is exempt explicitly, never by
being left out.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import runner.backends
from runner.backends.base import Backend, DelegatingBackend
from runner.backends.registry import BACKENDS, RECORD, load
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from tests.integration.conformance.backends import variants


def _backend_classes() -> list[type[Backend]]:
    for info in pkgutil.walk_packages(runner.backends.__path__, "runner.backends."):
        importlib.import_module(info.name)
    found: list[type[Backend]] = []
    pending: list[type[Backend]] = [Backend]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if (
                sub.__module__.startswith("runner.backends.")
                and not inspect.isabstract(sub)
                and not issubclass(sub, DelegatingBackend)
            ):
                found.append(sub)
    return found


def test_every_backend_class_is_a_registry_entry_in_the_suite_or_exempt() -> None:
    classes = _backend_classes()
    assert classes, "no backend class found under runner.backends"
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if c.name not in BACKENDS)
    assert missing == [], f"add a registry line for these (runner/backends/registry.py): {missing}"
    for entry in BACKENDS.values():
        assert bool(entry.conformance) != bool(entry.exempt), entry  # run, or exempt with why
        made_by = load(entry.factory).__self__  # type: ignore[attr-defined]
        assert made_by.name == entry.name and made_by in classes, (entry, made_by)
    assert {v.name for v in variants()} >= {"docker", "docker-copy", "namespace"}


def test_the_unsandboxed_process_backend_is_exempt_explicitly() -> None:
    assert UnsandboxedProcessBackend in _backend_classes()
    assert BACKENDS[RECORD].exempt and not BACKENDS[RECORD].conformance
    assert not BACKENDS[RECORD].selectable  # not a --backend choice either
    assert UnsandboxedProcessBackend.name == RECORD
