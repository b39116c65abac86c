"""The ``backend`` fixture of the attack battery: every sandboxing backend, one param each.

The attack files (tests/integration/test_attacks*.py) take ``backend`` from here, so each
attack runs once per entry of the conformance suite's `BACKENDS` (Docker, the bubblewrap
namespace backend): the same hostile tools, the same assertions. An entry's engine that is
unusable fails under ``CI=true`` and skips otherwise, as in the conformance suite.
``SANDBOX_REPLAY_TEST_BACKENDS=docker`` (names, comma-separated) runs a subset.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conformance.backends import BACKENDS, SandboxingBackend

__all__ = ["backend", "backend_entry"]


def _selected() -> list[SandboxingBackend]:
    names = os.environ.get("SANDBOX_REPLAY_TEST_BACKENDS", "")
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    return [b for b in BACKENDS if not wanted or b.name in wanted]


@pytest.fixture(
    scope="module", params=[pytest.param(b, id=b.name, marks=b.marks) for b in _selected()]
)
def backend_entry(request: pytest.FixtureRequest) -> SandboxingBackend:
    """The conformance entry of the backend under attack."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def backend(backend_entry: SandboxingBackend, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A connected backend of ``backend_entry`` (closed after the module)."""
    made = backend_entry.connect(request, f"attack-{uuid.uuid4().hex[:12]}")
    yield made
    close = getattr(made, "close", None)
    if callable(close):
        close()
