"""Shared fixtures. Docker tests fail (never skip) when CI=true or
SANDBOX_REPLAY_REQUIRE_DOCKER=1 and the engine or the sandbox image is unusable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from runner.cli.commands import register

# Every command on the typer app, for the tests that invoke `runner.cli.app.app` with typer's
# CliRunner: `runner.cli.entry.main` registers only the invoked command (the quick gate;
# tests/unit/cli/test_cli_gate.py runs it in fresh interpreters).
register()


def docker_required() -> bool:
    """True when an unusable Docker must fail tests rather than skip them."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get(
        "SANDBOX_REPLAY_REQUIRE_DOCKER", ""
    ) in ("1", "true", "yes")


def _unusable(reason: str, what: str = "Docker") -> None:
    if docker_required():
        pytest.fail(
            f"{what} is required here (CI=true or SANDBOX_REPLAY_REQUIRE_DOCKER=1): {reason}"
        )
    pytest.skip(f"{what} unusable: {reason}")


@pytest.fixture(scope="session")
def bwrap_usable() -> str:
    """The bwrap executable of the namespace backend, tried once (fails under CI when unusable)."""
    import shutil
    import subprocess

    found = shutil.which("bwrap")
    if found is None:
        _unusable("bwrap not found: apt-get install -y bubblewrap", "bubblewrap")
    tried = subprocess.run(
        [found, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true"],
        capture_output=True,
        check=False,
    )
    if tried.returncode != 0:
        _unusable(
            f"bwrap cannot make namespaces here: {tried.stderr.decode()[-500:]}", "bubblewrap"
        )
    return str(found)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker SDK client for a reachable engine (fails under CI when unreachable)."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:
        _unusable(f"engine not reachable: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image(docker_client: Any) -> str:
    """Tag of the sandbox image (SANDBOX_REPLAY_IMAGE or sandbox-replay:latest); must exist."""
    from runner.settings import DEFAULT_IMAGE

    tag = os.environ.get("SANDBOX_REPLAY_IMAGE", DEFAULT_IMAGE)
    try:
        docker_client.images.get(tag)
    except Exception as exc:
        _unusable(f"sandbox image {tag!r} missing ({exc}); run `make image`")
    return tag
