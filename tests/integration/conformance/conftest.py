"""The conformance suite's fixtures: every check runs once per sandboxing backend variant.

``variant`` is one conformance variant of a registry entry (`backends.variants`), ``subject``
the `runner.backends.conformance.Subject` it connects (one per module, closed after it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from runner.backends.conformance import Subject
from tests.integration.conformance.backends import Variant, variants
from tests.integration.conformance.backends import subject as make_subject


@pytest.fixture(scope="module", params=[v.param() for v in variants()])
def variant(request: pytest.FixtureRequest) -> Variant:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def subject(
    variant: Variant, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Subject]:
    made = make_subject(
        variant, request, f"conform-{uuid.uuid4().hex[:12]}", tmp_path_factory.mktemp("conform")
    )
    yield made
    made.backend.close()
