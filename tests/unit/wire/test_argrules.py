"""The call-time evaluator of argument rules (runner/wire/argrules.py), standard library only."""

from __future__ import annotations

from typing import Any

import pytest

from runner.errors import CapabilityDenied, InputError
from runner.runtime.registry import RuntimeRegistry
from runner.wire.argrules import MAX_VALUE_CHARS, RuleSet, guard

NO_RM = {
    "name": "no-rm",
    "tool": "shell.run",
    "action": "deny",
    "when": {"command": {"matches": r"^\s*rm\s+-[a-zA-Z]*r"}},
}
HOSTS = {
    "name": "api-hosts",
    "tool": "http.*",
    "action": "allow",
    "when": {"url": {"host_in": ["api.example.com", "*.internal.example.com"]}},
}


def _rules(*rules: dict[str, Any]) -> RuleSet:
    return RuleSet.from_json(list(rules))


def test_a_deny_rule_refuses_exactly_the_matching_calls_and_names_itself() -> None:
    rules = _rules(NO_RM)
    denied = rules.decide("shell.run", {"command": "rm -rf build/"})
    assert (denied.allowed, denied.rule, denied.action, denied.matched) == (
        False,
        "no-rm",
        "deny",
        True,
    )
    assert "no-rm" in denied.reason
    for command in ("rm notes.txt", "grep -rn 'rm -rf' docs/", "ls -r"):
        decision = rules.decide("shell.run", {"command": command})
        assert decision.allowed and decision.rule is None, command
    # another tool is not targeted; an absent argument makes the condition false
    assert rules.decide("shell.exec", {"command": "rm -rf /"}).allowed
    assert rules.decide("shell.run", {"cmd": "rm -rf /"}).allowed


def test_allow_rules_make_an_allow_list_for_their_tools() -> None:
    rules = _rules(HOSTS)
    for url in (
        "https://api.example.com/v1/x",
        "http://API.Example.com:8080/",
        "https://db.internal.example.com/q",
        "api.example.com:443",
    ):
        decision = rules.decide("http.get", {"url": url})
        assert decision.allowed and decision.rule == "api-hosts" and decision.matched, url
    for url in (
        "https://evil.example.org/",
        "https://api.example.com.evil.org/",
        "https://internal.example.com/",  # the glob needs a subdomain
        "not a url at all",
        12,
    ):
        decision = rules.decide("http.get", {"url": url})
        assert not decision.allowed and decision.rule == "api-hosts", url
        assert not decision.matched
    assert not rules.decide("http.get", {}).allowed  # absent: the allow list refuses it


def test_the_first_rule_that_holds_decides_in_file_order() -> None:
    allow_ls = {"name": "ls-ok", "tool": "shell.run", "action": "allow", "when": {}}
    assert _rules(NO_RM, allow_ls).decide("shell.run", {"command": "rm -r x"}).rule == "no-rm"
    assert _rules(allow_ls, NO_RM).decide("shell.run", {"command": "rm -r x"}).allowed


def test_conditions_equals_in_and_non_string_values() -> None:
    rules = _rules(
        {"name": "prod", "tool": "db.*", "action": "deny", "when": {"env": {"equals": "prod"}}},
        {
            "name": "tables",
            "tool": "db.drop",
            "action": "deny",
            "when": {"opts.table": {"in": ["users", 7]}},
        },
        {
            "name": "list",
            "tool": "shell.argv",
            "action": "deny",
            "when": {"argv": {"matches": "rm"}},
        },
    )
    assert rules.decide("db.query", {"env": "prod"}).rule == "prod"
    assert rules.decide("db.query", {"env": "dev"}).allowed
    assert rules.decide("db.drop", {"opts": {"table": 7}}).rule == "tables"
    assert rules.decide("db.drop", {"opts": {"table": "7"}}).allowed  # JSON values differ
    # a list is searched as its canonical JSON text
    assert rules.decide("shell.argv", {"argv": ["rm", "-rf", "/"]}).rule == "list"


def test_a_value_too_long_to_search_is_denied_unread_even_by_an_allow_rule() -> None:
    huge = "a" * (MAX_VALUE_CHARS + 1)
    decision = _rules(NO_RM).decide("shell.run", {"command": huge})
    assert not decision.allowed and decision.rule == "no-rm" and "fail closed" in decision.reason
    allow = {"name": "a", "tool": "t", "action": "allow", "when": {"x": {"matches": "a"}}}
    assert not _rules(allow).decide("t", {"x": huge}).allowed


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ({"rules": 1}, "rules"),
        ([{"name": "x", "tool": "t", "action": "block"}], "rules[0].action"),
        ([{"name": "bad name", "tool": "t", "action": "deny"}], "rules[0].name"),
        ([{"name": "x", "tool": "t", "action": "deny", "extra": 1}], "rules[0]"),
        (
            [{"name": "x", "tool": "t", "action": "deny", "when": {"a": {"matches": "("}}}],
            "rules[0].when.a.matches",
        ),
        (
            [{"name": "x", "tool": "t", "action": "deny", "when": {"a": {"like": "x"}}}],
            "rules[0].when.a",
        ),
        (
            [{"name": "x", "tool": "t", "action": "deny", "when": {"a": {"host_in": "x"}}}],
            "rules[0].when.a.host_in",
        ),
        ([NO_RM, NO_RM], "rules[1].name"),
    ],
)
def test_bad_rules_are_input_errors_naming_the_field(rules: Any, field: str) -> None:
    with pytest.raises(InputError) as caught:
        RuleSet.from_json(rules)
    assert caught.value.fields["field"] == field


def test_the_guard_refuses_with_capability_denied_and_notes_the_rule_in_the_record() -> None:
    record: dict[str, Any] = {}
    with pytest.raises(CapabilityDenied) as caught:
        guard(_rules(NO_RM), "shell.run", {"command": "rm -r /"}, record)
    assert caught.value.fields == {"tool_id": "shell.run", "rule": "no-rm"}
    assert "no-rm" in str(caught.value)
    assert record["meta"]["argument_rule"]["rule"] == "no-rm"
    allowed: dict[str, Any] = {}
    guard(_rules(HOSTS), "http.get", {"url": "https://api.example.com"}, allowed)
    assert allowed["meta"]["argument_rule"]["allowed"] is True
    untouched: dict[str, Any] = {}
    guard(_rules(NO_RM), "shell.run", {"command": "ls"}, untouched)
    assert untouched == {}


def test_the_runtime_registry_gives_each_tool_the_rules_that_target_it() -> None:
    manifest = {
        "policy": {"name": "p", "mode": "shadow", "hash": "h", "rules": [NO_RM, HOSTS]},
        "tools": [
            {"id": "shell.run", "effect": "local", "disposition": "recorded"},
            {"id": "http.get", "effect": "read", "disposition": "recorded"},
            {"id": "kb.search", "effect": "read", "disposition": "recorded"},
        ],
    }
    registry = RuntimeRegistry.from_manifest(manifest, "shadow")
    assert registry.resolve("shell.run").rules.names() == ["no-rm"]
    assert registry.resolve("http.get").rules.names() == ["api-hosts"]
    assert not registry.resolve("kb.search").rules
    manifest["policy"]["rules"] = [{"name": "x"}]  # type: ignore[index]
    with pytest.raises(InputError) as caught:
        RuntimeRegistry.from_manifest(manifest, "shadow")
    assert caught.value.fields["field"] == "policy.rules[0].tool"
