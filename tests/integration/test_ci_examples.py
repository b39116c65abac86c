"""examples/ci: each job's commands, run as written, in a fresh checkout, on the real engine.

The GitHub Actions workflow's ``run:`` steps (each in ``bash --noprofile --norc -eo pipefail``,
as the runner runs them) and the GitLab job's ``script:`` lines (one ``bash -eo pipefail``
session, as GitLab runs them) are extracted from the YAML and run in a copy of the repository's
files (tracked and untracked-unignored, committed into a new git repository: no venv, no
state), in that order, each expected to exit 0; then the reports they publish are read.

What the platforms provide is provided here: ``python`` on PATH (a fresh venv for GitHub's
setup-python; the bare interpreter for GitLab, whose job makes its own venv), the variables the
files take from the platform (``${{ ... }}`` values in ``env:``, ``$CI_PROJECT_DIR``), the
local engine in place of the ``docker:dind`` service. Nothing leaves the machine: pip runs with
no index (``PIP_NO_INDEX``), the project's dependencies visible through ``PYTHONPATH`` (this
test's own venv) and no build isolation; the sandbox image is built under a test tag from a
base image already present; sandboxes have no network.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from runner.settings import DEFAULT_BASE_IMAGE, OFFLINE_BASE_IMAGE
from tests.support.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

CI = REPO / "examples" / "ci"
# the `uses:` steps: the platform's own actions (checkout, Python, publishing), not commands
KNOWN_ACTIONS = (
    "actions/checkout@",
    "actions/setup-python@",
    "mikepenz/action-junit-report@",
    "actions/upload-artifact@",
)


def fresh_checkout(where: Path) -> Path:
    """The repository's files (as in the working tree) committed into a new repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = REPO / name
        if source.is_file():  # a file deleted in the working tree is not copied
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "checkout"]):
        subprocess.run([*git, *args], cwd=where, check=True, capture_output=True)
    return where


def present_base(docker_client: Any) -> str:
    for ref in (DEFAULT_BASE_IMAGE, OFFLINE_BASE_IMAGE):
        with contextlib.suppress(Exception):
            docker_client.images.get(ref)
            return ref
    pytest.fail(f"neither {DEFAULT_BASE_IMAGE} nor {OFFLINE_BASE_IMAGE} is present: no pull here")


@pytest.fixture
def platform_env(docker_client: Any, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment both jobs get: offline pip, a test image tag, the local engine."""
    tag = f"sandbox-replay-test:ci-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SANDBOX_REPLAY_", "PIP_"))}
    env.update(
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",  # pip's spelling: "0" turns build isolation off
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONPATH=sysconfig.get_paths()["purelib"],  # the dependencies, not runner itself
        SANDBOX_REPLAY_IMAGE=tag,
        SANDBOX_REPLAY_BASE_IMAGE=present_base(docker_client),
        SANDBOX_REPLAY_LOG_LEVEL="warning",
        HOME=str(tmp_path / "home"),
    )
    try:
        yield env
    finally:
        with contextlib.suppress(Exception):  # the build may have failed before tagging
            docker_client.images.remove(tag, noprune=False)


def _expand(value: str, env: dict[str, str]) -> str:
    """GitLab's expansion of ``$NAME`` / ``${NAME}`` in a variable (unknown names stay)."""

    def known(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return env.get(name, match.group(0))

    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", known, value)


def _run(script: str, cwd: Path, env: dict[str, str], shell: list[str]) -> str:
    proc = subprocess.run(
        [*shell, script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode} of:\n{script}\n--- output:\n{output}"
    return output


def _published(clone: Path) -> None:
    """The reports the jobs publish: two JUnit files that pass, the HTML report, the diff."""
    reports = clone / "reports"
    check = ElementTree.parse(reports / "check.xml").getroot().find("testsuite")
    assert check is not None and (check.get("tests"), check.get("failures")) == ("2", "0")
    reproduce = ElementTree.parse(reports / "reproduce.xml").getroot().find("testsuite")
    assert reproduce is not None and reproduce.get("tests") == "1"
    assert (reproduce.get("failures"), reproduce.get("errors")) == ("0", "0")
    assert "<html" in (reports / "reproduce.html").read_text(encoding="utf-8").lower()
    diff = json.loads((reports / "policy-diff.json").read_text(encoding="utf-8"))
    assert diff["changed"] is False and diff["calls"] == 200


def _installed_in(venv: Path, env: dict[str, str]) -> None:
    """The commands ran the copy pip installed into ``venv``, not this checkout's sources."""
    assert (venv / "bin" / "sandbox-replay").exists()
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import runner; print(runner.__file__)"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(venv)), where


@pytest.mark.slow
def test_github_actions_steps_run_in_a_fresh_checkout(
    platform_env: dict[str, str], tmp_path: Path
) -> None:
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text(encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    clone = fresh_checkout(tmp_path / "repo")
    venv = tmp_path / "setup-python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # pip: bundled
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    platform = {"BASE_SHA": head}
    assert set(job["env"]) == set(platform), "a new ${{ }} value: give it here"
    github_env = tmp_path / "github-env"
    env = dict(platform_env, **platform, RUNNER_TEMP=str(runner_temp), GITHUB_ENV=str(github_env))
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]
    ran = 0
    for step in job["steps"]:
        if "uses" in step:
            assert str(step["uses"]).startswith(KNOWN_ACTIONS), step["uses"]
            continue
        github_env.write_text("")
        _run(step["run"], clone, env, shell)
        # what a step appends to $GITHUB_ENV (NAME=value lines) the next steps get
        for line in github_env.read_text().splitlines():
            name, _, value = line.partition("=")
            env[name] = value
        ran += 1
    assert ran == 6
    assert env["SANDBOX_REPLAY_STATE_DIR"] == str(runner_temp / "sandbox-replay")
    assert (runner_temp / "sandbox-replay").is_dir()  # the state went there
    _installed_in(venv, env)
    _published(clone)


@pytest.mark.slow
def test_gitlab_job_script_runs_in_a_fresh_checkout(
    platform_env: dict[str, str], tmp_path: Path
) -> None:
    config = yaml.safe_load((CI / "gitlab-ci.yml").read_text(encoding="utf-8"))
    job = config["sandbox-replay-gate"]
    clone = fresh_checkout(tmp_path / "repo")
    bare = tmp_path / "image-bin"  # the job image's python: the interpreter, no venv
    bare.mkdir()
    (bare / "python").symlink_to(Path(sys._base_executable).resolve())  # type: ignore[attr-defined]
    env = dict(platform_env, CI_PROJECT_DIR=str(clone))
    env["PATH"] = f"{bare}:{env['PATH']}"
    for name, value in job["variables"].items():
        if name in ("DOCKER_HOST", "DOCKER_TLS_CERTDIR"):  # the dind service: the local engine here
            continue
        env[name] = _expand(str(value), env)
    assert env["SANDBOX_REPLAY_STATE_DIR"] == f"{clone}/.sandbox-replay"
    _run("\n".join(job["script"]), clone, env, ["bash", "-eo", "pipefail", "-c"])
    _installed_in(clone / ".venv", env)
    _published(clone)
