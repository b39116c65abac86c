"""``rules:`` in policy files: validated, hashed, compiled once, carried in the manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

from runner.domain.registry import Registry
from runner.policy import load_policy
from runner.sdk import canonical_json

RULE = """rules:
  - name: no-rm
    tool: shell.*
    action: deny
    when: {command: {matches: '^rm\\s'}}
"""


def test_a_policy_without_rules_hashes_as_before_rules_existed() -> None:
    shadow = load_policy("shadow")
    data = shadow.spec.model_dump(mode="json")
    assert data.pop("rules") == []
    assert data.pop("redaction") is None  # the other section that hashes only when present
    assert data.pop("map") == {}  # likewise the effect map of SDK tools
    assert shadow.hash == hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()
    assert "rules" not in Registry([]).manifest(shadow)["policy"]  # the manifest as before


def test_rules_are_loaded_compiled_hashed_and_mounted(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: p\nmode: shadow\n", encoding="utf-8")
    ruled = tmp_path / "ruled.yaml"
    ruled.write_text("name: p\nmode: shadow\n" + RULE, encoding="utf-8")
    policy = load_policy(ruled)
    assert policy.hash != load_policy(plain).hash  # a rule changes what the policy says
    assert policy.rules.names() == ["no-rm"]
    assert not policy.rules.decide("shell.run", {"command": "rm x"}).allowed
    assert policy.argument_rules() == [
        {
            "name": "no-rm",
            "tool": "shell.*",
            "action": "deny",
            "when": {"command": {"matches": "^rm\\s"}},
        }
    ]
    assert Registry([]).manifest(policy)["policy"]["rules"] == policy.argument_rules()
    assert policy.spec.rules[0].summary() == "deny shell.* when command matches '^rm\\\\s'"
