"""The conformance checks (`runner.backends.conformance.CHECKS`) on every sandboxing backend.

Each check is one test per variant of the registry (the test id names both): docker,
docker-copy and namespace today, whatever the registry holds tomorrow. A check that does not
apply to a backend (its `Capabilities` declare the weaker property, or the image's Python
cannot use the host's bytecode) is skipped with the reason; everything else must pass. An
unusable engine fails these tests under ``CI=true`` (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runner.backends.conformance import NotApplicable, Subject
from tests.integration.conformance.backends import check_params


@pytest.mark.parametrize("check", check_params())
def test_conformance(subject: Subject, check: Callable[[Subject], None]) -> None:
    try:
        check(subject)
    except NotApplicable as exc:
        pytest.skip(str(exc))
