"""examples/ci validate against the platforms' published schemas, offline.

``check-jsonschema`` (the dev extra) ships GitHub's workflow schema and GitLab's CI schema in
the package (``--builtin-schema vendor.github-workflows`` / ``vendor.gitlab-ci``). It runs here
under an audit hook that refuses every socket, with ``--no-cache`` (nothing served from an
earlier download): a schema that needed the network would fail, not pass. A file that breaks
the schema fails, so the check can fail; a remote schema fails under the hook, so the hook bites.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

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
