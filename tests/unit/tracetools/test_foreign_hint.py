"""A trace from another tool gets a hint naming the ``sandbox-replay import`` that reads it.

The files are the importers' own fixtures, recorded by others (licenses beside them) and the
shared τ²-bench results; a task file (no ``v`` either) gets no hint.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.errors import InputError
from runner.tracetools.reader import read_trace

ROOT = Path(__file__).resolve().parents[3]
IMPORT = ROOT / "tests" / "fixtures" / "import"
REALDATA = Path(os.environ.get("SANDBOX_REPLAY_REALDATA_DIR", "/work/shared/realdata"))

CASES = [
    (IMPORT / "inspect" / "arith.eval", "inspect"),  # a zip archive
    (IMPORT / "atif" / "rfc-example.json", "atif"),  # a pretty-printed document
    (IMPORT / "atif" / "delegation.jsonl", "atif"),  # JSONL without v
    (IMPORT / "chat.jsonl", "openai-messages"),
    (IMPORT / "chat-array.json", "openai-messages"),
    (IMPORT / "chat-bare.json", "openai-messages"),
    (IMPORT / "tau2-mini" / "results.json", "tau2"),
    (IMPORT / "otel" / "kagent" / "k8s.json", "otel"),
    (IMPORT / "otel" / "kagent" / "tempo_export_with_batches.json", "otel"),
    (IMPORT / "otel" / "any-agent" / "GOOGLE.json", "otel"),
]


@pytest.mark.parametrize(("path", "command"), CASES, ids=lambda c: str(c).rsplit("/", 1)[-1])
def test_another_tools_file_names_its_import(path: Path, command: str) -> None:
    with pytest.raises(InputError) as info:
        read_trace(path)
    message = str(info.value)
    assert f"`sandbox-replay import {command} {path} --out DIR` reads it" in message
    assert message.startswith(f"{path}:1: ")  # still the file and line of the problem


def test_the_shared_tau2_results_name_tau2() -> None:
    results = REALDATA / "tau2-retail" / "results.json"
    if not results.is_file():
        pytest.skip(f"no {results} (set SANDBOX_REPLAY_REALDATA_DIR)")
    with pytest.raises(InputError, match="sandbox-replay import tau2 "):
        read_trace(results)


def test_a_file_of_no_known_shape_gets_no_hint(tmp_path: Path) -> None:
    tasks = ROOT / "examples" / "helpdesk" / "tasks.jsonl"  # this project's task file
    with pytest.raises(InputError) as info:
        read_trace(tasks)
    assert "import" not in str(info.value) and "format version" in str(info.value)
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"not json at all\n")
    with pytest.raises(InputError) as info:
        read_trace(junk)
    assert "import" not in str(info.value)
