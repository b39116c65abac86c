"""``policy diff`` on real recorded calls: the public τ² retail runs (40 runs, 299 tool calls).

The runs are imported (`runner.importers`) into traces; two policies are compared over them and
every count is checked against the source file read directly, not through the project's code.
The real results live outside the repository (../shared/realdata, ``SANDBOX_REPLAY_REALDATA_DIR``):
absent, the test skips, or fails under CI=true.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runner.importers.output import write_import
from runner.importers.tau2 import read_tau2
from runner.policy import diff_policies, load_policy
from runner.settings import Settings
from tests.support.paths import REPO

OLD = """name: every-tool
mode: shadow
tools: {unsafe_allow: ["*"]}
"""
NEW = (
    OLD.replace("every-tool", "tightened")
    + """rules:
  - name: no-cancel-by-mistake
    tool: "*cancel_pending_order"
    action: deny
    when: {reason: {equals: ordered by mistake}}
  - name: well-formed-order-ids
    tool: "*get_order_details"
    action: allow
    when: {order_id: {matches: '^#W\\d{7}$'}}
  - name: no-blank-street
    tool: "*modify_user_address"
    action: deny
    when: {address1: {matches: '^\\s*$'}}
"""
)


def _results() -> Path:
    folder = Settings().realdata_dir
    folder = folder if folder.is_absolute() else (REPO / folder).resolve()
    path = folder / "tau2-retail" / "results.json"
    if not path.is_file():
        message = f"τ² retail results not found at {path}: set SANDBOX_REPLAY_REALDATA_DIR"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _source_calls(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of every tool call in the source, read directly."""
    calls = []
    for simulation in json.loads(path.read_text(encoding="utf-8"))["simulations"]:
        for message in simulation["messages"]:
            for call in message.get("tool_calls") or []:
                args = call["arguments"]
                calls.append((call["name"], json.loads(args) if isinstance(args, str) else args))
    return calls


def test_a_tightened_policy_over_the_real_retail_calls(tmp_path: Path) -> None:
    results = _results()
    write_import(read_tau2(results), tmp_path / "imported", {})
    (tmp_path / "old.yaml").write_text(OLD, encoding="utf-8")
    (tmp_path / "new.yaml").write_text(NEW, encoding="utf-8")
    report = diff_policies(
        load_policy(tmp_path / "old.yaml"),
        load_policy(tmp_path / "new.yaml"),
        [tmp_path / "imported" / "traces"],
    )
    data = report.to_json()
    source = _source_calls(results)
    assert data["calls"] == len(source) == 299
    by_mistake = sum(
        1
        for name, a in source
        if name == "cancel_pending_order" and a.get("reason") == "ordered by mistake"
    )
    malformed = sum(
        1
        for name, a in source
        if name == "get_order_details" and not re.search(r"^#W\d{7}$", str(a.get("order_id")))
    )
    denied = {
        tool.rsplit(".", 1)[-1]: entry["count"] for tool, entry in data["newly_denied"].items()
    }
    expected = {"cancel_pending_order": by_mistake}
    if malformed:
        expected["get_order_details"] = malformed
    assert (by_mistake, malformed) == (2, 1) and denied == expected  # "#9502127": no W
    assert data["newly_allowed"] == {}
    unchanged = sum(c["allowed"] + c["refused"] for c in data["unchanged"].values())
    assert unchanged == len(source) - sum(expected.values())
    per_tool = Counter(name for name, _ in source)
    for tool, counts in data["unchanged"].items():
        name = tool.rsplit(".", 1)[-1]
        assert counts["allowed"] + counts["refused"] == per_tool[name] - expected.get(name, 0)
    assert data["new"]["unused_rules"] == ["no-blank-street"]
    assert data["new"]["unresolvable"] == {} and data["old"]["unresolvable"] == {}
