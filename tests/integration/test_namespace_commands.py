"""``run`` and ``reproduce`` on the bubblewrap namespace backend, through the installed CLI.

``run --backend namespace`` runs its episode in a bwrap sandbox (the trace's ``run`` line says
``"backend": "namespace"``) and ``SANDBOX_REPLAY_BACKEND=namespace`` does the same for
``reproduce``, which replays that trace to ``reproduced``. bwrap must be usable (fails, never
skips, under ``CI=true``: tests/conftest.py ``bwrap_usable``); the root filesystem is the
sandbox image's, exported once into the state folder.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runner.backends.labels import container_name
from tests.support.cli import run_cli_json

pytestmark = pytest.mark.docker

TOOLS = """
from runner.sdk import Effect, tool


@tool("text.upper", effect=Effect.PURE, description="Upper-case a text.")
def upper(text: str) -> str:
    return text.upper()
"""

WORKFLOW = """\
name: upper
version: "1"
tools: [upper_tools]
steps:
  - id: shout
    tool: text.upper
    args: {text: "${task.text}"}
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    task = json.dumps({"task_id": "t1", "input": {"text": "quiet"}})
    for name, text in (
        ("upper_tools.py", textwrap.dedent(TOOLS)),
        ("upper.yaml", WORKFLOW),
        ("tasks.jsonl", task + "\n"),
    ):
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o644)
    return root


def _run_line(trace: Path) -> dict[str, Any]:
    first = trace.read_text(encoding="utf-8").splitlines()[0]
    line: dict[str, Any] = json.loads(first)
    return line


def test_run_and_reproduce_on_the_namespace_backend(
    tmp_path: Path, sandbox_image: str, bwrap_usable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _project(tmp_path / "upper")
    monkeypatch.delenv("SANDBOX_REPLAY_BACKEND", raising=False)
    code, summary, err = run_cli_json(
        ["run", "upper.yaml", "--tasks", "tasks.jsonl", "--task", "t1", "--backend", "namespace"],
        work,
        sandbox_image,
    )
    assert (code, summary["status"]) == (0, "succeeded"), (summary, err)
    assert summary["output"] == "QUIET", summary
    head = _run_line(Path(summary["trace"]))
    assert head["backend"] == "namespace"
    # the sandbox's own name (its record's and cgroup's), as the log says it
    assert head["sandbox"].startswith(container_name(summary["run_id"]) + "-"), head
    monkeypatch.setenv("SANDBOX_REPLAY_BACKEND", "namespace")
    assert os.environ["SANDBOX_REPLAY_BACKEND"] == "namespace"  # run_cli passes os.environ on
    code, payload, err = run_cli_json(["reproduce", summary["trace"]], work, sandbox_image)
    (report,) = payload["traces"]  # reproduce --json: {exit_code, outcomes, traces}
    assert (code, report["outcome"]) == (0, "reproduced"), (report, err)
    replay = Path(report["replay_trace"])
    assert _run_line(replay)["backend"] == "namespace", report
    # the namespace sandbox's own files (its rootfs, the runtime, the snapshot) are not listed
    assert report["nondeterminism"]["entries"] == [], report["nondeterminism"]


LOOKUP_TOOLS = """
import socket

from runner.sdk import Effect, tool


@tool("net.lookup", effect=Effect.PURE, description="Resolve a name (fails: no network).")
def lookup(host: str) -> str:
    try:
        socket.getaddrinfo(host, 443)
    except OSError as exc:
        return "failed: " + type(exc).__name__
    return "resolved"
"""

LOOKUP_WORKFLOW = """\
name: lookup
version: "1"
tools: [lookup_tools]
steps:
  - id: look
    tool: net.lookup
    args: {host: "new-dependency.invalid"}
"""


@pytest.mark.parametrize("backend", ["docker", "namespace"])
def test_a_name_lookup_is_one_dns_destination_on_either_backend(
    backend: str, tmp_path: Path, sandbox_image: str, bwrap_usable: str
) -> None:
    """The same run tries the same destinations on both backends (review4).

    The namespace root filesystem's ``/etc/resolv.conf`` is empty, so glibc queried its default
    127.0.0.1:53, which the witness did not know as a nameserver: the lookup was also logged as
    ``connect 127.0.0.1:53 (denied)``, and a baseline written on Docker failed the namespace run.
    """
    work = tmp_path / "lookup"
    work.mkdir()
    work.chmod(0o755)
    task = json.dumps({"task_id": "t1", "input": {}})
    for name, text in (
        ("lookup_tools.py", textwrap.dedent(LOOKUP_TOOLS)),
        ("lookup.yaml", LOOKUP_WORKFLOW),
        ("tasks.jsonl", task + "\n"),
    ):
        (work / name).write_text(text, encoding="utf-8")
        (work / name).chmod(0o644)
    code, summary, err = run_cli_json(
        ["run", "lookup.yaml", "--tasks", "tasks.jsonl", "--task", "t1", "--backend", backend],
        work,
        sandbox_image,
    )
    assert (code, summary["status"]) == (0, "succeeded"), (summary, err)
    tried = sorted((o["kind"], o["host"] or o["address"], o["port"]) for o in summary["outbound"])
    assert tried == [("dns", "new-dependency.invalid", 443)], summary["outbound"]
