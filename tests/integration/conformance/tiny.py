"""A tiny backend for the proof that adding a backend is one registry line (not a test module).

`TinyBackend` is a thin wrapper around the Docker backend under a name of its own: the
conformance checks demand real isolation, which only a sandboxing engine gives, so the
wrapper borrows it; what it proves is the path a new backend takes, by name, through the
registry: ``--backend tiny``, the factory, the checks, the reaper's child process.
"""

from __future__ import annotations

from typing import Any

from runner.backends.base import DelegatingBackend
from runner.backends.registry import BACKENDS, BackendEntry, BackendOptions

ENTRY = BackendEntry(
    "tiny", "a test wrapper", "tests.integration.conformance.tiny:TinyBackend.make"
)
"""The registry line (a test registers it with ``monkeypatch.setitem(BACKENDS, "tiny", ENTRY)``)."""


class TinyBackend(DelegatingBackend):
    """The Docker backend under the name ``tiny``."""

    name = "tiny"

    @classmethod
    def make(cls, settings: Any, options: BackendOptions) -> TinyBackend:
        """The registry's factory: Docker's, from the same settings and options, wrapped."""
        return cls(BACKENDS["docker"].make(settings, options))
