"""`runner.cli.lazysettings`: ``check`` builds no `Settings` when the environment sets none.

The stand-in is only sound while `Settings` reads nothing but ``SANDBOX_REPLAY_<FIELD>``
variables: these tests pin that, and that a bad variable still fails ``check`` with exit 2.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runner.cli.app import CliState
from runner.cli.lazysettings import (
    DEFAULT_LOG_FORMAT,
    DEFAULT_LOG_LEVEL,
    ENV_PREFIX,
    FIELDS,
    DeferredSettings,
    environment_sets_any,
)
from runner.settings import Settings
from tests.support.paths import REPO


def test_the_fields_and_the_sources_are_those_of_settings() -> None:
    config = Settings.model_config
    assert set(Settings.model_fields) == FIELDS
    assert config.get("env_prefix") == ENV_PREFIX
    assert not config.get("case_sensitive")
    assert config.get("env_file") is None and config.get("secrets_dir") is None
    assert config.get("cli_parse_args") in (None, False)
    for name, field in Settings.model_fields.items():
        assert field.alias is None and field.validation_alias is None, name
    assert Settings.model_fields["log_format"].default == DEFAULT_LOG_FORMAT
    assert Settings.model_fields["log_level"].default == DEFAULT_LOG_LEVEL


@pytest.mark.parametrize(
    ("environ", "sets"),
    [
        ({}, False),
        ({"PATH": "/bin", "SANDBOX_REPLAY_REQUIRE_DOCKER": "1"}, False),  # not a setting
        ({"SANDBOX_REPLAY_IMAGE": "x"}, True),
        ({"sandbox_replay_Timeout_S": "abc"}, True),  # pydantic-settings ignores the case
        ({"SANDBOX_REPLAY_MAX_CALLS": ""}, True),  # empty is a value too
    ],
)
def test_environment_sets_any(environ: dict[str, str], sets: bool) -> None:
    assert environment_sets_any(environ) is sets


def test_deferred_settings_build_once_on_first_read() -> None:
    built: list[Settings] = []

    def build() -> Settings:
        built.append(Settings())
        return built[-1]

    deferred = DeferredSettings(build)
    assert built == []
    assert deferred.image == built[0].image and deferred.state_dir == built[0].state_dir
    assert len(built) == 1


def test_the_stand_in_only_when_the_environment_sets_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in list(os.environ):
        if key.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(key)
    assert isinstance(CliState().settings(deferred=True), DeferredSettings)
    monkeypatch.setenv("SANDBOX_REPLAY_IMAGE", "other:tag")
    settings = CliState().settings(deferred=True)
    assert isinstance(settings, Settings) and settings.image == "other:tag"


def test_check_still_refuses_a_bad_variable_exit_2() -> None:
    env = {**os.environ, "SANDBOX_REPLAY_TIMEOUT_S": "abc"}
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "check", "v1.yaml"],
        cwd=REPO / "examples" / "helpdesk",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "SANDBOX_REPLAY_TIMEOUT_S" in proc.stderr
