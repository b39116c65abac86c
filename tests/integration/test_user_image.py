"""Acceptance: an episode runs in a user's own image.

The image is built offline from Debian bullseye (python3.9) with one extra Python package,
PyYAML from Debian's `python3-yaml` (pip inside `docker build` has no index here), and the
project's sandbox Dockerfile on top. The user's tool imports that package.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.resources import images_dir
from tests.integration._episodes import Project

pytestmark = pytest.mark.docker

BASE_TAG = "sandbox-replay-test-base:bullseye-yaml"
USER_TAG = "sandbox-replay-test-user:bullseye-yaml"

YAML_TOOLS = """
import sys

import yaml

from runner.sdk import Effect, tool

@tool("config.parse", effect=Effect.PURE)
def parse(text: str) -> dict:
    return {"parsed": yaml.safe_load(text), "python": list(sys.version_info[:2]),
            "yaml": yaml.__version__}
"""

YAML_STEPS = """
- id: parse
  tool: config.parse
  args: {text: "${task.config}"}
"""


def _present(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def user_image(docker_client: Any) -> str:
    if not _present(docker_client, BASE_TAG):
        script = images_dir() / "build-base-offline.sh"
        proc = subprocess.run(
            ["bash", str(script), BASE_TAG, "bullseye", "python3-yaml"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    docker_client.images.build(
        path=str(images_dir()),
        tag=USER_TAG,
        buildargs={"BASE_IMAGE": BASE_TAG},
        pull=False,
        rm=True,
        forcerm=True,
    )
    return USER_TAG


def test_episode_runs_in_a_bullseye_user_image_with_an_extra_package(
    user_image: str, tmp_path: Path
) -> None:
    from runner.backends.docker import DockerBackend

    project = Project(tmp_path / "proj", YAML_TOOLS, module="yaml_tools")
    backend = DockerBackend.connect()
    try:
        out = project.run(
            backend,
            user_image,
            project.workflow(YAML_STEPS),
            state_dir=tmp_path / "s",
            task_input={"config": "retries: 3\nhosts: [a, b]\n"},
        )
    finally:
        backend.close()
    assert out.result.status == "succeeded", out.end
    body = out.body("parse")
    assert body["parsed"] == {"retries": 3, "hosts": ["a", "b"]}
    assert body["python"] == [3, 9]
    assert out.lines[0]["environment"]["python"].startswith("3.9.")
