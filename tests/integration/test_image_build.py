"""`sandbox-replay image build --offline` on the real engine: never pulls, reuses a present base."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from runner import __version__
from runner.settings import DEFAULT_BASE_IMAGE, OFFLINE_BASE_IMAGE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker


def present_base(docker_client: Any, sandbox_image: str) -> str:
    labels = docker_client.images.get(sandbox_image).labels or {}
    for ref in (labels.get("io.sandbox-replay.base"), OFFLINE_BASE_IMAGE, DEFAULT_BASE_IMAGE):
        if not ref:
            continue
        try:
            docker_client.images.get(ref)
        except Exception:  # absent: try the next candidate
            continue
        return ref
    pytest.fail("no base image present although the sandbox image exists")


def image_build(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", "image", "build", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_offline_build_falls_back_to_the_present_offline_base(
    docker_client: Any, sandbox_image: str
) -> None:
    base = present_base(docker_client, sandbox_image)
    tag = f"sandbox-replay-test:build-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "SANDBOX_REPLAY_IMAGE": tag,
        "SANDBOX_REPLAY_BASE_IMAGE": "sandbox-replay-test:absent-base",
        "SANDBOX_REPLAY_OFFLINE_BASE_IMAGE": base,
    }
    try:
        proc = image_build(env, "--offline")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"base image: {base} (offline base, already present)" in proc.stdout
        assert "pulling" not in proc.stdout
        built = docker_client.images.get(tag)
        assert built.labels["io.sandbox-replay.version"] == __version__
        assert built.labels["io.sandbox-replay.base"] == base
        assert built.attrs["Config"]["User"] == "10001:10001"
    finally:
        with contextlib.suppress(Exception):  # the build may have failed before tagging
            docker_client.images.remove(tag, noprune=False)


def test_a_failed_pull_falls_back_to_the_offline_base(
    docker_client: Any, sandbox_image: str
) -> None:
    # without --offline the base is pulled first. A registry on a loopback port that
    # nothing listens on (the engine tries it and is refused: nothing leaves this machine)
    # makes the pull fail for real; the build goes on with the offline base that is present.
    base = present_base(docker_client, sandbox_image)
    tag = f"sandbox-replay-test:pull-fails-{uuid.uuid4().hex[:8]}"
    unreachable = "127.0.0.1:9/sandbox-replay-test/python:3.12-slim"
    env = {
        **os.environ,
        "SANDBOX_REPLAY_IMAGE": tag,
        "SANDBOX_REPLAY_BASE_IMAGE": unreachable,
        "SANDBOX_REPLAY_OFFLINE_BASE_IMAGE": base,
    }
    try:
        proc = image_build(env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"pulling {unreachable} ..." in proc.stdout
        assert f"pull of {unreachable} failed" in proc.stdout
        assert f"base image: {base} (offline base, already present)" in proc.stdout
        assert docker_client.images.get(tag).labels["io.sandbox-replay.base"] == base
    finally:
        with contextlib.suppress(Exception):  # the build may have failed before tagging
            docker_client.images.remove(tag, noprune=False)
