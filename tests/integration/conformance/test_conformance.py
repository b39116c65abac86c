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

from runner.backends.conformance import CHECKS, NotApplicable, Subject

# Run alone (marker ``serial``, pyproject.toml): a reaper elsewhere meanwhile (every ``run``
# starts with one) would take the killed owner's sandbox first, as it carries no ledger.
SERIAL = frozenset({"reaper_removes_a_dead_owners_sandbox_only"})


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(c, id=c.__name__, marks=(pytest.mark.serial,) if c.__name__ in SERIAL else ())
        for c in CHECKS
    ],
)
def test_conformance(subject: Subject, check: Callable[[Subject], None]) -> None:
    try:
        check(subject)
    except NotApplicable as exc:
        pytest.skip(str(exc))
