"""Base-image choice of `sandbox-replay image build` over a fake client: never a pull offline."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest
import requests

from runner import __version__
from runner.backends.docker import image as image_mod
from runner.errors import InfrastructureError


class FakeImagesAPI:
    def __init__(self, present: set[str], build_events: list[dict[str, Any]] | None = None) -> None:
        self.present = set(present)
        self.calls: list[tuple[str, Any]] = []
        self.build_events = build_events or [
            {"stream": "Step 1/5 : ARG BASE_IMAGE\n"},
            {"aux": {"ID": "sha256:" + "ab" * 32}},
        ]

    def inspect_image(self, ref: str) -> dict[str, Any]:
        self.calls.append(("inspect_image", ref))
        if ref not in self.present:
            response = requests.Response()
            response.status_code = 404
            raise docker.errors.ImageNotFound("404", response=response, explanation="no such image")
        return {"Id": "sha256:" + "cd" * 32}

    def pull(self, repository: str, tag: str, stream: bool, decode: bool) -> list[dict[str, Any]]:
        self.calls.append(("pull", f"{repository}:{tag}"))
        return [{"error": "registry unreachable"}]

    def build(self, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append(("build", kwargs))
        return self.build_events


def build(
    api: FakeImagesAPI, offline: bool, lines: list[str], platform: str | None = None
) -> image_mod.BuildResult:
    return image_mod.build_image(
        api,
        image="sandbox-replay:test",
        base_image="python:3.12-slim",
        offline_base_image="sandbox-replay-base:bookworm",
        offline=offline,
        echo=lines.append,
        platform=platform,
    )


def test_present_base_is_used_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_mod, "build_offline_base", _forbidden)
    api = FakeImagesAPI({"python:3.12-slim"})
    lines: list[str] = []
    result = build(api, offline=True, lines=lines)
    assert (result.base, result.base_source) == ("python:3.12-slim", "local")
    assert "base image: python:3.12-slim (present locally)" in lines
    kwargs = next(c[1] for c in api.calls if c[0] == "build")
    assert kwargs["buildargs"] == {"BASE_IMAGE": "python:3.12-slim", "VERSION": __version__}
    assert kwargs["network_mode"] == "none" and kwargs["pull"] is False
    assert kwargs["labels"]["io.sandbox-replay.version"] == __version__
    assert result.image_id == "sha256:" + "ab" * 32


def test_offline_never_pulls_and_reuses_the_offline_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_mod, "build_offline_base", _forbidden)
    api = FakeImagesAPI({"sandbox-replay-base:bookworm"})
    lines: list[str] = []
    result = build(api, offline=True, lines=lines)
    assert result.base_source == "offline-present"
    assert not [c for c in api.calls if c[0] == "pull"]
    assert any("offline base, already present" in line for line in lines)


def test_offline_builds_the_base_with_debootstrap_when_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeImagesAPI(set())
    built: list[str] = []

    def fake_offline(tag: str, echo: Any, docker_host: str | None) -> None:
        built.append(tag)
        api.present.add(tag)

    monkeypatch.setattr(image_mod, "build_offline_base", fake_offline)
    result = build(api, offline=True, lines=[])
    assert built == ["sandbox-replay-base:bookworm"]
    assert result.base_source == "offline-built"
    assert not [c for c in api.calls if c[0] == "pull"]


def test_failed_pull_falls_back_to_the_offline_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_mod, "build_offline_base", _forbidden)
    api = FakeImagesAPI({"sandbox-replay-base:bookworm"})
    lines: list[str] = []
    result = build(api, offline=False, lines=lines)
    assert ("pull", "python:3.12-slim") in api.calls
    assert result.base_source == "offline-present"
    assert any("registry unreachable" in line for line in lines)


def test_build_error_carries_the_log_tail() -> None:
    api = FakeImagesAPI(
        {"python:3.12-slim"},
        build_events=[{"stream": "Step 3/5 : RUN set -eu\n"}, {"error": "useradd: not found"}],
    )
    with pytest.raises(InfrastructureError, match="useradd: not found") as info:
        build(api, offline=True, lines=[])
    assert "Step 3/5" in str(info.value) and info.value.exit_code == 6


def _forbidden(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("debootstrap must not run here")


# -- macOS and Windows: no debootstrap, and no fix line that needs it ----------------


@pytest.mark.parametrize("platform", ["darwin", "win32"])
@pytest.mark.parametrize("offline", [False, True])
def test_without_debootstrap_a_missing_base_is_an_error_naming_what_works_there(
    monkeypatch: pytest.MonkeyPatch, platform: str, offline: bool
) -> None:
    monkeypatch.setattr(image_mod, "build_offline_base", _forbidden)
    api = FakeImagesAPI(set())
    with pytest.raises(InfrastructureError) as raised:
        build(api, offline=offline, lines=[], platform=platform)
    fix = raised.value.fields["fix"]
    assert "docker pull python:3.12-slim" in fix and "SANDBOX_REPLAY_BASE_IMAGE" in fix
    assert "debootstrap" not in fix and "image build --offline" not in fix
    assert ("without --offline" in fix) is offline
    assert (("pull", "python:3.12-slim") in api.calls) is not offline  # pulled unless offline
    assert not [c for c in api.calls if c[0] == "build"]


def test_on_macos_a_present_offline_base_is_still_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_mod, "build_offline_base", _forbidden)
    api = FakeImagesAPI({"sandbox-replay-base:bookworm"})
    result = build(api, offline=False, lines=[], platform="darwin")
    assert result.base_source == "offline-present"


@pytest.mark.parametrize("platform", ["darwin", "win32", "linux"])
def test_every_fix_line_names_a_command_of_the_platform(platform: str) -> None:
    from runner.backends.docker.client import image_fix
    from runner.backends.docker.engine import engine_fix

    image, engine = image_fix(platform), engine_fix(platform)
    assert "sandbox-replay image build" in image
    if platform == "linux":
        assert "--offline" in image and "systemctl" in engine
    else:
        assert "--offline" not in image and "debootstrap" not in image
        assert "systemctl" not in engine and "Docker Desktop" in engine
