"""``--runtime`` / ``SANDBOX_REPLAY_RUNTIME`` without an engine: setting, check, config.

The real engine is in tests/integration/test_docker_runtime.py; here a stand-in API answers
``GET /info`` so that the refusal (exit 2, naming the engine's runtimes), the pass-through into
HostConfig and ``doctor``'s line are pinned on every machine.
"""

from __future__ import annotations

from typing import Any

import pytest

from runner.backends.base import SandboxSpec
from runner.backends.docker import checks as C
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.runtimes import engine_runtimes, require_runtime
from runner.cli.backend_choice import with_runtime
from runner.errors import EXIT_INPUT, InputError
from runner.settings import Settings

INFO = {"Runtimes": {"runc": {"path": "runc"}, "crun": {"path": "/usr/bin/crun"}}}


class InfoAPI:
    """``info()`` of an engine with runc (default) and crun; records ``close``."""

    api_version = "1.41"

    def __init__(self, info: dict[str, Any] | None = None) -> None:
        self._info = {**INFO, "DefaultRuntime": "runc"} if info is None else info
        self.closed = False

    def info(self) -> dict[str, Any]:
        return self._info

    def close(self) -> None:
        self.closed = True


def _spec() -> SandboxSpec:
    return SandboxSpec(run_id="r1", image="img", command=("python3", "-c", "pass"))


def test_the_runtime_reaches_host_config_and_none_leaves_the_engines_default() -> None:
    with_crun = DockerBackend(InfoAPI(), address="unix:///x.sock", runtime="crun")
    assert with_crun.create_kwargs(_spec())["host_config"]["Runtime"] == "crun"
    plain = DockerBackend(InfoAPI(), address="unix:///x.sock")
    assert "Runtime" not in plain.create_kwargs(_spec())["host_config"]


def test_the_engines_runtimes_are_read_from_info() -> None:
    have = engine_runtimes(InfoAPI())
    assert have.names == ("crun", "runc") and have.default == "runc"
    assert engine_runtimes(InfoAPI({})).names == ()


def test_an_unknown_runtime_is_invalid_input_naming_the_engines() -> None:
    with pytest.raises(InputError) as caught:
        require_runtime(InfoAPI(), "runsc")
    assert caught.value.exit_code == EXIT_INPUT == 2
    assert "no runtime 'runsc'" in str(caught.value) and "crun, runc" in str(caught.value)
    assert require_runtime(InfoAPI(), "crun").names == ("crun", "runc")


def test_connect_refuses_an_unknown_runtime_and_closes_its_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runner.backends.docker.backend as B

    api = InfoAPI()
    monkeypatch.setattr(B, "connect", lambda host=None, **kw: api)
    with pytest.raises(InputError):
        DockerBackend.connect("unix:///x.sock", runtime="runsc")
    assert api.closed
    backend = DockerBackend.connect("unix:///x.sock", runtime="crun")
    assert backend.runtime == "crun"


def test_the_setting_comes_from_the_environment_and_is_a_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_RUNTIME", "crun")
    assert Settings().runtime == "crun"
    monkeypatch.setenv("SANDBOX_REPLAY_RUNTIME", "../bin/sh")
    with pytest.raises(ValueError, match="runtime"):
        Settings()
    monkeypatch.delenv("SANDBOX_REPLAY_RUNTIME")
    assert Settings().runtime is None


def test_the_cli_option_overrides_the_setting() -> None:
    settings = Settings(runtime="crun")
    assert with_runtime(settings, None) is settings
    assert with_runtime(settings, "runsc").runtime == "runsc"
    with pytest.raises(InputError, match="--runtime"):
        with_runtime(settings, "a b")


def test_doctor_lists_the_runtimes_and_requires_the_asked_one() -> None:
    backend = DockerBackend(InfoAPI(), address="unix:///x.sock")
    listed = C.runtimes_check(backend)
    assert listed.ok and not listed.required
    assert listed.detail == "the engine's OCI runtimes: crun, runc (default)"
    asked = C.runtimes_check(backend, "runsc")
    assert not asked.ok and asked.required and "runsc" in asked.fix
    assert C.runtimes_check(backend, "crun").ok
