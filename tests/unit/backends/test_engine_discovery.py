"""Engine discovery in the docker CLI's order (runner/backends/docker/engine.py).

The context files are written in the format the docker CLI writes them
(tests/support/dockercontext.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.backends.docker import client as C
from runner.backends.docker.engine import discover_engine, engine_fix
from runner.errors import InfrastructureError
from tests.support.dockercontext import write_context


@pytest.fixture
def docker_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty docker config folder as ``DOCKER_CONFIG``; no DOCKER_HOST or DOCKER_CONTEXT."""
    folder = tmp_path / "docker-config"
    folder.mkdir()
    for name in ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return folder


def test_the_current_context_of_the_config_file_is_used(docker_config: Path) -> None:
    sock = "unix:///home/u/.colima/default/docker.sock"
    write_context(docker_config, "colima", sock, current=True)
    engine = discover_engine()
    assert engine.address == sock
    assert engine.source == "context"
    assert engine.context == "colima"
    assert "'colima'" in engine.reason and str(docker_config / "config.json") in engine.reason
    assert engine.client_kwargs() == {"base_url": sock}


def test_docker_context_beats_the_current_context(
    docker_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_context(docker_config, "colima", "unix:///c.sock", current=True)
    write_context(docker_config, "orbstack", "unix:///o.sock")
    monkeypatch.setenv("DOCKER_CONTEXT", "orbstack")
    engine = discover_engine()
    assert (engine.address, engine.context) == ("unix:///o.sock", "orbstack")
    assert "DOCKER_CONTEXT" in engine.reason
    # DOCKER_CONTEXT=default means the platform default, whatever the config file says
    monkeypatch.setenv("DOCKER_CONTEXT", "default")
    assert discover_engine(exists=lambda p: True).source == "default"


def test_docker_host_beats_every_context_and_the_setting_beats_docker_host(
    docker_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_context(docker_config, "colima", "unix:///c.sock", current=True)
    monkeypatch.setenv("DOCKER_CONTEXT", "colima")
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2375")
    engine = discover_engine()
    assert (engine.address, engine.source) == ("tcp://10.0.0.5:2375", "DOCKER_HOST")
    explicit = discover_engine("unix:///mine.sock")
    assert (explicit.address, explicit.source) == ("unix:///mine.sock", "setting")
    assert explicit.reason == "SANDBOX_REPLAY_DOCKER_HOST"


def test_a_named_context_that_does_not_exist_is_an_error_not_another_engine(
    docker_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (docker_config / "config.json").write_text('{"currentContext": "gone"}')
    with pytest.raises(InfrastructureError) as raised:
        discover_engine(exists=lambda p: True)
    assert "'gone'" in str(raised.value) and "does not exist" in str(raised.value)
    assert "docker context ls" in raised.value.fields["fix"]
    monkeypatch.setenv("DOCKER_CONTEXT", "typo")
    with pytest.raises(InfrastructureError, match="'typo' \\(from DOCKER_CONTEXT\\)"):
        discover_engine()


def test_a_context_without_a_config_file_is_refused_not_read_from_the_working_directory(
    docker_config: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the SDK would look in ./contexts without a config file: a project folder could supply one
    write_context(tmp_path / "work", "evil", "tcp://203.0.113.9:2375")
    (tmp_path / "work" / "config.json").unlink()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("DOCKER_CONTEXT", "evil")
    with pytest.raises(InfrastructureError, match="no docker config file") as raised:
        discover_engine()
    assert "docker context use evil" in raised.value.fields["fix"]


def test_a_corrupted_context_file_is_a_clear_error(docker_config: Path) -> None:
    write_context(docker_config, "broken", "unix:///b.sock", current=True)
    meta = next((docker_config / "contexts" / "meta").iterdir()) / "meta.json"
    meta.write_text("{not json")
    with pytest.raises(InfrastructureError, match=r"'broken'.*unreadable"):
        discover_engine()


def test_the_default_is_the_platform_socket_or_pipe(docker_config: Path) -> None:
    linux = discover_engine(platform="linux", exists=lambda p: True)
    assert (linux.address, linux.source) == ("unix:///var/run/docker.sock", "default")
    windows = discover_engine(platform="win32", exists=lambda p: True)
    assert windows.address == "npipe:////./pipe/docker_engine"


def test_podman_socket_when_the_default_socket_is_absent(
    docker_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    present = {"/run/user/1000/podman/podman.sock"}
    engine = discover_engine(platform="linux", exists=present.__contains__)
    assert (engine.address, engine.source) == ("unix:///run/user/1000/podman/podman.sock", "podman")
    assert "/var/run/docker.sock is absent" in engine.reason
    rootful = discover_engine(platform="linux", exists={"/run/podman/podman.sock"}.__contains__)
    assert rootful.address == "unix:///run/podman/podman.sock"
    # no Podman either: the default, whose "not reachable" error carries the fix
    assert discover_engine(platform="linux", exists=lambda p: False).source == "default"
    # Windows: Podman machine's pipe when Docker Desktop's is absent
    pipe = "\\\\.\\pipe\\podman-machine-default"
    win = discover_engine(platform="win32", exists={pipe}.__contains__)
    assert win.address == "npipe:////./pipe/podman-machine-default"
    # a Podman machine on macOS
    home = Path("/Users/u")
    mac_sock = str(home / ".local/share/containers/podman/machine/podman.sock")
    mac = discover_engine(platform="darwin", home=home, exists={mac_sock}.__contains__)
    assert mac.address == f"unix://{mac_sock}"


def test_ssh_engines_use_the_ssh_command(docker_config: Path) -> None:
    engine = discover_engine("ssh://me@build-host")
    assert engine.client_kwargs()["use_ssh_client"] is True


def test_an_unreachable_context_engine_names_the_context_and_the_fix(
    docker_config: Path, tmp_path: Path
) -> None:
    write_context(docker_config, "colima", f"unix://{tmp_path}/nothing.sock", current=True)
    with pytest.raises(InfrastructureError) as raised:
        C.connect()
    message = str(raised.value)
    assert f"{tmp_path}/nothing.sock" in message
    assert "docker context 'colima'" in message
    assert raised.value.fields["chosen"].startswith("docker context 'colima'")
    assert raised.value.fields["fix"] == C.ENGINE_FIX


def test_engine_fix_is_worded_for_each_platform() -> None:
    assert "Docker Desktop" in engine_fix("darwin") and "colima start" in engine_fix("darwin")
    assert "systemctl" not in engine_fix("darwin") + engine_fix("win32")
    assert "systemctl" in engine_fix("linux")
    for platform in ("darwin", "win32", "linux"):
        assert "docker context use" in engine_fix(platform)
