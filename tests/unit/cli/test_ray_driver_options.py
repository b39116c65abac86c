"""``--backend ray``'s driver-side options: the host's provider endpoints are read
into the settings before the keys leave the environment, and ``--unsafe-open-cluster`` is
refused without ``--backend ray`` (exit 2). The cluster itself: tests/integration/
test_ray_auth.py."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.cli.backend_choice import backend_factory, with_host_endpoints
from runner.errors import InputError
from runner.providers.openai import OpenAIProvider
from runner.settings import Settings
from tests.support.paths import REPO


def test_host_endpoints_enter_the_settings_and_the_provider_finds_them_there() -> None:
    env = {"OPENAI_API_KEY": "sk-host", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    settings = with_host_endpoints(Settings(), env)
    assert settings.openai_api_key is not None
    assert settings.openai_api_key.get_secret_value() == "sk-host"
    provider = OpenAIProvider.from_settings(settings, environ={})  # the environment is empty
    try:
        assert provider.base_url == "http://127.0.0.1:9/v1"
    finally:
        provider.close()


def test_a_key_the_settings_hold_wins_over_the_host_variable() -> None:
    settings = with_host_endpoints(
        Settings(anthropic_api_key="sk-settings"), {"ANTHROPIC_API_KEY": "sk-host"}
    )
    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == "sk-settings"
    assert with_host_endpoints(Settings(), {}) == Settings()


def test_the_unsafe_opt_in_needs_the_ray_backend() -> None:
    with pytest.raises(InputError, match="--unsafe-open-cluster needs --backend ray"):
        backend_factory(Settings(), "docker", None, unsafe_open_cluster=True)
    result = CliRunner().invoke(app, ["doctor", "--unsafe-open-cluster"])
    assert result.exit_code == 2, result.output
    helpdesk = REPO / "examples" / "helpdesk"
    args = ["submit", "--variant", str(helpdesk / "v1.yaml"), "--tasks",
            str(helpdesk / "tasks.jsonl"), "--unsafe-open-cluster",
            "--backend", "namespace"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--unsafe-open-cluster" in result.output, result.output


def test_a_backend_whose_extra_is_missing_is_refused_before_the_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plan naming a job that never runs was printed first (``--backend ray`` without the
    extra: the plan, a job id, a 0/44 progress bar, then the error)."""
    from runner.backends import registry

    missing = registry.BackendEntry(
        "far", "a backend whose package is absent", "runner_absent_pkg.backend:B.make", extra="far"
    )
    monkeypatch.setitem(registry.BACKENDS, "far", missing)
    with pytest.raises(
        InputError, match=r"needs the far extra: pip install 'sandbox-replay\[far\]'"
    ):
        backend_factory(Settings(), "far")
