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


def build(api: FakeImagesAPI, offline: bool, lines: list[str]) -> image_mod.BuildResult:
    return image_mod.build_image(
        api,
        image="sandbox-replay:test",
        base_image="python:3.12-slim",
        offline_base_image="sandbox-replay-base:bookworm",
        offline=offline,
        echo=lines.append,
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
