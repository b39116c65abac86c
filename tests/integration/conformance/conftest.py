"""The conformance suite's fixtures: each test module runs once per sandboxing backend.

``entry`` is one row of `tests.integration.conformance.backends.BACKENDS` (its capability
flags and marks), ``backend`` the backend it connects (one per module, closed after it),
``image`` the sandbox image that backend runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from runner.backends.base import Backend
from tests.integration.conformance.backends import BACKENDS, SandboxingBackend


@pytest.fixture(
    scope="module", params=[pytest.param(b, id=b.name, marks=b.marks) for b in BACKENDS]
)
def entry(request: pytest.FixtureRequest) -> SandboxingBackend:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def backend(entry: SandboxingBackend, request: pytest.FixtureRequest) -> Iterator[Backend]:
    made = entry.connect(request, f"conform-{uuid.uuid4().hex[:12]}")
    yield made
    close = getattr(made, "close", None)
    if callable(close):
        close()


@pytest.fixture(scope="module")
def image(entry: SandboxingBackend, request: pytest.FixtureRequest) -> str:
    return entry.image(request)
