"""The sandboxing backends the conformance suite and the attack battery run against.

Nothing is listed here: every conformance variant of every entry of the backend registry
(`runner.backends.registry.BACKENDS`, ``conformance``) is one `Variant`: ``docker``,
``docker-copy`` (the Docker backend in copy mode, for engines that cannot see this host's
paths) and ``namespace`` today. A backend joins by its registry line. Every variant runs the
real sandbox image (the namespace backend exports its root filesystem), so each needs the
engine and the image (``sandbox_image``); a backend that cannot be made here fails under
``CI=true`` and skips otherwise (tests/conftest.py). ``SANDBOX_REPLAY_TEST_BACKENDS=docker``
(names, comma-separated) runs a subset.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.backends.base import Backend
from runner.backends.conformance import Subject
from runner.backends.registry import BACKENDS, BackendEntry, BackendOptions
from runner.errors import InfrastructureError
from runner.settings import Settings

__all__ = [
    "NAMESPACE_ROOT",
    "STATE_DIR",
    "Variant",
    "check_params",
    "connect",
    "subject",
    "variants",
]

# The state folder of the suite's backends: one per uid, kept between runs (the namespace
# backend exports the image's root filesystem into STATE_DIR/namespace once per image id).
STATE_DIR = Path(tempfile.gettempdir()) / f"sandbox-replay-conformance-{os.getuid()}"
NAMESPACE_ROOT = STATE_DIR / "namespace"


@dataclass(frozen=True)
class Variant:
    """One conformance variant of a registry entry.

    Attributes:
        entry: the registry entry.
        name: the variant (a key of ``entry.conformance``): the test id.
    """

    entry: BackendEntry
    name: str

    def param(self) -> object:
        """This variant as a pytest param (every backend runs the Docker-built image)."""
        return pytest.param(self, id=self.name, marks=pytest.mark.docker)


def variants() -> list[Variant]:
    """Every registry entry's conformance variants (``SANDBOX_REPLAY_TEST_BACKENDS``: some)."""
    names = os.environ.get("SANDBOX_REPLAY_TEST_BACKENDS", "")
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    return [
        Variant(entry, name)
        for entry in BACKENDS.values()
        for name in entry.conformance or {}
        if not wanted or name in wanted
    ]


def _settings(variant: Variant, image: str) -> Settings:
    changes = dict((variant.entry.conformance or {})[variant.name])
    return Settings(state_dir=STATE_DIR, image=image).model_copy(update=changes)


def _unusable(variant: Variant, exc: InfrastructureError) -> None:
    from tests.conftest import _unusable as unusable

    unusable(str(exc), f"the {variant.name} backend")


def connect(variant: Variant, request: pytest.FixtureRequest, session_id: str) -> Backend:
    """A connected backend of ``variant`` (fails under CI, else skips, when it cannot be made)."""
    image = str(request.getfixturevalue("sandbox_image"))
    try:
        return variant.entry.make(_settings(variant, image), BackendOptions(session_id=session_id))
    except InfrastructureError as exc:
        _unusable(variant, exc)
        raise


def subject(
    variant: Variant, request: pytest.FixtureRequest, session_id: str, scratch: Path
) -> Subject:
    """The conformance `Subject` of ``variant``, connected (as `connect`)."""
    from runner.episode.prepare import runner_mounts

    image = str(request.getfixturevalue("sandbox_image"))
    try:
        return Subject.of(
            variant.entry,
            variant.name,
            Settings(state_dir=STATE_DIR, image=image),
            image=image,
            runner_mounts=runner_mounts(),
            scratch=scratch,
            session_id=session_id,
        )
    except InfrastructureError as exc:
        _unusable(variant, exc)
        raise


# Run alone (marker ``serial``, pyproject.toml): a reaper elsewhere meanwhile (every ``run``
# starts with one) would take the killed owner's sandbox first, as it carries no ledger.
SERIAL_CHECKS = frozenset({"reaper_removes_a_dead_owners_sandbox_only"})


def check_params() -> list[object]:
    """`runner.backends.conformance.CHECKS` as pytest params, the reaper's marked ``serial``."""
    from runner.backends.conformance import CHECKS

    return [
        pytest.param(
            c, id=c.__name__, marks=(pytest.mark.serial,) if c.__name__ in SERIAL_CHECKS else ()
        )
        for c in CHECKS
    ]
