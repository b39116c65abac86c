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


@pytest.fixture(scope="session")
def sdk_image(docker_client: Any) -> str:
    """Tag of the agent-SDK image (SANDBOX_REPLAY_SDK_IMAGE or sandbox-replay:sdks; `make
    sdk-image`): the sandbox image with the agent SDKs and pydantic; must exist."""
    tag = os.environ.get("SANDBOX_REPLAY_SDK_IMAGE", "sandbox-replay:sdks")
    try:
        docker_client.images.get(tag)
    except Exception as exc:
        _unusable(f"SDK image {tag!r} missing ({exc}); run `make sdk-image`")
    return tag


# --- the suite in parallel workers (README "Development"; the Makefile's `test`) ---------------
#
# `make test` runs every test not marked ``serial`` in pytest-xdist workers with ``--dist
# loadgroup``, then the ``serial`` ones alone. In a worker this hook makes the work units:
#
# - a test with an ``xdist_group`` mark of its own goes with the other tests of that group (one
#   worker runs them one after the other: they share something that two at once would fight
#   over);
# - a test of a module that starts a second Docker engine or a Ray cluster (it holds one of
#   `ENGINE_STARTERS`) goes in the group ``second-engine``: each such module starts a dockerd
#   (~0.5 GB, a CPU-second-hungry start, an image loaded into it) and the Ray ones a head and
#   two raylets that write /tmp/ray's current-cluster file; two at once only slow each other
#   down, or worse;
# - every other test goes with the rest of its module that shares its module-scoped parameters
#   (a conformance or attack module once per backend): a module fixture (a connected backend, a
#   project, a built image) is then made once, not once per worker that got one of its tests.
#
# and orders the units longest first (integration before unit tests, a unit with ``slow``
# tests before one without, by `SECONDS_GUESS`), so that the last unit to start is a short one
# (the Makefile passes ``--no-loadscope-reorder``, which keeps this order). Outside xdist nothing
# changes.

# A guess at a test's seconds, by its marks (the first that it has), to rank the units.
SECONDS_GUESS = (("slow", 30.0), ("docker", 5.0))
OTHER_SECONDS_GUESS = 0.05


# The helpers of tests/integration that start a dockerd of their own or a Ray cluster.
ENGINE_STARTERS = ("second_engine", "isolated_engine", "ray_cluster")


def _group_name(mark: pytest.Mark) -> str:
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def _work_unit(item: pytest.Item) -> str:
    """``item``'s module, plus the index of each parameter of its module-scoped fixtures."""
    unit = item.nodeid.split("::", 1)[0]
    callspec = getattr(item, "callspec", None)
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if callspec is None:
        return unit
    for name in sorted(callspec.params):
        found = defs.get(name)
        if found and found[-1].scope in ("module", "package", "session"):
            unit += f"[{name}={callspec.indices[name]}]"
    return unit


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` in an xdist worker: work units and their order (above)."""
    if not hasattr(config, "workerinput") or config.getoption("dist", "no") != "loadgroup":
        return
    unit_of: dict[str, str] = {}
    seconds: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            module = getattr(item, "module", None)
            starts_engine = any(callable(getattr(module, n, None)) for n in ENGINE_STARTERS)
            group = pytest.mark.xdist_group("second-engine" if starts_engine else _work_unit(item))
            item.add_marker(group)
            mark = group.mark
        unit = unit_of[item.nodeid] = _group_name(mark)
        guess = next(
            (s for name, s in SECONDS_GUESS if item.get_closest_marker(name)), OTHER_SECONDS_GUESS
        )
        seconds[unit] = seconds.get(unit, 0.0) + guess
        first.setdefault(unit, index)

    def rank(pair: tuple[int, pytest.Item]) -> tuple[float, int, int]:
        index, item = pair
        unit = unit_of[item.nodeid]
        return (-seconds[unit], first[unit], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=rank)]
