"""The ``backend`` fixture of the attack battery: every sandboxing backend, one param each.

The attack files (tests/integration/test_attacks*.py) take ``backend`` from here, so each
attack runs once per conformance variant of the backend registry (Docker, Docker in copy mode,
the bubblewrap namespace backend: `tests.integration.conformance.backends.variants`): the same
hostile tools, the same assertions. A backend that cannot be made here fails under ``CI=true``
and skips otherwise, as in the conformance suite. ``SANDBOX_REPLAY_TEST_BACKENDS=docker``
(names, comma-separated) runs a subset.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conformance.backends import Variant, connect, variants

__all__ = ["backend", "backend_entry"]


@pytest.fixture(scope="module", params=[v.param() for v in variants()])
def backend_entry(request: pytest.FixtureRequest) -> Variant:
    """The conformance variant of the backend under attack."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def backend(backend_entry: Variant, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A connected backend of ``backend_entry`` (closed after the module)."""
    made = connect(backend_entry, request, f"attack-{uuid.uuid4().hex[:12]}")
    yield made
    made.close()
