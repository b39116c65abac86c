"""The user's packages reach the sandbox image from a wheelhouse filled on the host.

`sandbox-replay image build --requirements FILE` builds ``sandbox-replay:sdks`` (never
``:latest``) with the official SDKs. The test builds it with ``--no-download`` from the cached
wheelhouse that ``make sdk-image`` filled with ``pip download`` on the host (a test sends nothing
off this machine; Docker's layer cache makes the rebuild quick when nothing changed), then shows
in a hardened sandbox (network none, read-only, no capabilities, non-root) that ``import openai,
anthropic, agents, langchain_core, langgraph, langchain_anthropic`` works and that every
installed SDK is the wheel of the host's wheelhouse: every pin's version, and the image's
checksums of the wheels it installed equal the host files'.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from runner.backends import labels as L
from runner.backends.base import STDOUT, ResourceLimits, SandboxSpec
from runner.backends.docker import DockerBackend
from tests.conftest import docker_required

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "tests" / "fixtures" / "sdk-image" / "requirements.txt"
SDK_IMAGE = os.environ.get("SANDBOX_REPLAY_SDK_IMAGE", "sandbox-replay:sdks")
WHEELHOUSE_IN_IMAGE = "/usr/local/share/sandbox-replay/wheelhouse"

_PINNED = [
    line.split("==")[0].strip()
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines()
    if "==" in line and not line.startswith("#")
]
"""The distributions requirements.txt pins: each must be in the image at its pin."""

PROBE = f"""
import importlib.metadata as md, json, os, socket, sys, time
t = time.monotonic()
import openai, anthropic, agents, langchain_core, langgraph, langchain_anthropic
r = {{"import_s": round(time.monotonic() - t, 2), "uid": os.getuid(),
     "versions": {{n: md.version(n) for n in {sorted(_PINNED)!r}}},
     "files": {{"openai": openai.__file__, "anthropic": anthropic.__file__,
               "agents": agents.__file__}},
     "sums": open("{WHEELHOUSE_IN_IMAGE}/SHA256SUMS").read(),
     "installed": open("{WHEELHOUSE_IN_IMAGE}/installed.txt").read().split()}}
try:
    socket.create_connection(("192.0.2.1", 443), timeout=2); r["net"] = "connected"
except OSError as e:
    r["net"] = type(e).__name__
try:
    open("/usr/local/lib/probe", "w"); r["rootfs"] = "writable"
except OSError as e:
    r["rootfs"] = type(e).__name__
print(json.dumps(r))
"""


def _pins() -> dict[str, str]:
    pins = {}
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip()] = version.strip()
    return pins


@pytest.fixture(scope="module")
def built(docker_client: Any, sandbox_image: str) -> dict[str, Any]:
    """Build sandbox-replay:sdks from the cached wheelhouse; the build's output and folder."""
    assert sandbox_image != SDK_IMAGE, "the SDK image must never be the default image"
    env = {**os.environ, "SANDBOX_REPLAY_LOG_LEVEL": "warning"}
    command = [sys.executable, "-m", "runner", "image", "build", "--offline", "--no-download"]
    command += ["--tag", SDK_IMAGE, "--requirements", str(REQUIREMENTS)]
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=1200, cwd=ROOT, env=env, check=False
    )
    output = proc.stdout + proc.stderr
    if proc.returncode == 2 and "wheelhouse" in output:
        message = f"the cached wheelhouse is missing or empty: run `make sdk-image`\n{output}"
        if docker_required():
            pytest.fail(message)
        pytest.skip(message)
    assert proc.returncode == 0, output
    found = re.search(r"with the wheels of (\S+)", proc.stdout)
    assert found, proc.stdout
    return {"stdout": proc.stdout, "wheelhouse": Path(found.group(1))}


@pytest.fixture(scope="module")
def probed(built: dict[str, Any]) -> dict[str, Any]:
    backend = DockerBackend.connect()
    spec = SandboxSpec(
        run_id=f"sdkimage-{uuid.uuid4().hex[:12]}",
        image=SDK_IMAGE,
        command=("python3", "-I", "-c", PROBE),
        limits=ResourceLimits(memory_mb=512, pids_limit=64, cpus=1.0, tmpfs_mb=16),
        labels={f"{L.PREFIX}.purpose": "test"},
    )
    out, err = bytearray(), bytearray()
    try:
        with backend.sandbox(spec) as box:
            deadline = time.monotonic() + 240
            for frame in box.frames(0.25):
                if frame is not None:
                    (out if frame[0] == STDOUT else err).extend(frame[1])
                assert time.monotonic() < deadline, "the import probe did not end"
            state = box.wait(30)
    finally:
        backend.close()
    assert state.exit_code == 0, err.decode(errors="replace")[-3000:]
    result: dict[str, Any] = json.loads(out.decode().splitlines()[-1])
    return result


def test_the_sdks_import_in_a_hardened_sandbox(probed: dict[str, Any]) -> None:
    assert probed["versions"] == _pins()
    assert all(path.startswith("/usr/") for path in probed["files"].values())
    assert probed["uid"] != 0
    assert probed["net"] != "connected" and probed["rootfs"] != "writable"


def test_the_installed_wheels_are_the_host_wheelhouse_files(
    built: dict[str, Any], probed: dict[str, Any], docker_client: Any
) -> None:
    wheelhouse: Path = built["wheelhouse"]
    in_image = {}
    for line in probed["sums"].splitlines():
        digest, name = line.split()
        in_image[name] = digest
    host = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in wheelhouse.glob("*.whl")}
    assert in_image, "the image lists no wheel"
    assert {name: host.get(name) for name in in_image} == in_image
    for name, version in _pins().items():
        stem = name.replace("-", "_")
        assert any(n.startswith(f"{stem}-{version}-") for n in in_image), (name, sorted(in_image))
        assert f"{name}=={version}" in probed["installed"]
    labels = docker_client.images.get(SDK_IMAGE).labels
    assert re.fullmatch(r"[0-9a-f]{64}", labels["io.sandbox-replay.wheelhouse"])


def test_the_default_image_is_untouched(docker_client: Any, sandbox_image: str) -> None:
    labels = docker_client.images.get(sandbox_image).labels or {}
    if sandbox_image == "sandbox-replay:latest":
        assert "io.sandbox-replay.wheelhouse" not in labels
