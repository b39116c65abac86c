"""The tool registry: built from modules and manifests, capability-filtered views, the manifest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from runner.domain.registry import Registry
from runner.domain.workflow import load_workflow
from runner.errors import InputError, ToolNotResolvable
from runner.policy import PolicySpec, load_policy, policy_from_spec
from runner.sdk import schema_hash
from runner.tools.source import registry_for_workflow
from tests.support.paths import REPO

ROOT = REPO
FIXTURES = ROOT / "tests" / "fixtures" / "helpdesk"
MANIFEST_KEYS = {
    "id",
    "effect",
    "description",
    "schema",
    "schema_hash",
    "module",
    "qualname",
    "disposition",
}


def _registry(name: str = "safe.yaml") -> Registry:
    return registry_for_workflow(load_workflow(FIXTURES / name))


def test_registry_of_a_module_has_every_tool_with_schema_and_hash() -> None:
    registry = _registry()
    assert registry.ids() == [
        "ticket.get",
        "kb.search",
        "reply.draft",
        "notes.append",
        "ticket.close",
        "email.send",
        "legacy.purge",
    ]
    get = registry.resolve("ticket.get")
    assert get.effect.value == "read"
    assert get.schema["required"] == ["ticket_id"]
    assert get.schema_hash == schema_hash(get.schema)
    assert (get.module, get.qualname, get.origin) == ("hd_tools", "get_ticket", "hd_tools")
    assert get.location.endswith("tests/fixtures/helpdesk/hd_tools.py:10")
    assert registry.tool_roots() == [FIXTURES]
    assert registry.resolve("legacy.purge").effect_text() == "unsafe (no effect class declared)"


def test_shadow_view_removes_unsafe_tools_structurally() -> None:
    registry = _registry()
    view = registry.restrict(load_policy("shadow"))
    assert "ticket.close" not in view
    assert "ticket.close" in registry  # the unfiltered registry is unchanged
    assert {t.id: t.disposition for t in view} == {
        "ticket.get": "recorded",
        "kb.search": "recorded",
        "reply.draft": "execute",
        "notes.append": "execute",
    }
    with pytest.raises(ToolNotResolvable) as info:
        view.resolve("ticket.close")
    error = info.value
    assert str(error) == (
        'tool "ticket.close" is unsafe: denied by policies/shadow.yaml (deny effect unsafe)'
    )
    assert error.fields["tool_id"] == "ticket.close"
    assert error.fields["effect"] == "unsafe"
    assert error.fields["rule"] == "deny effect unsafe"
    assert error.exit_code == 3
    with pytest.raises(ToolNotResolvable, match="no effect class declared"):
        view.resolve("legacy.purge")


def test_unknown_id_is_unresolvable() -> None:
    view = _registry().restrict(load_policy("shadow"))
    with pytest.raises(ToolNotResolvable, match=r'tool "ticket\.fetch" does not resolve') as info:
        view.resolve("ticket.fetch")
    assert info.value.fields["rule"] == "unresolvable"
    with pytest.raises(ToolNotResolvable):
        _registry().resolve("ticket.fetch")


def test_reproduce_view_keeps_unsafe_tools_as_recordings_only() -> None:
    view = _registry().restrict(load_policy("reproduce"))
    assert view.resolve("ticket.close").disposition == "recorded"
    assert view.resolve("notes.append").disposition == "recorded"
    assert view.resolve("reply.draft").disposition == "execute"
    assert view.modules() == ["hd_tools"]


def test_restricting_again_only_narrows() -> None:
    strict = policy_from_spec(
        PolicySpec.model_validate(
            {"name": "strict", "mode": "shadow", "deny_effects": ["unsafe", "local"]}
        ),
        "strict.yaml",
    )
    view = _registry().restrict(load_policy("shadow")).restrict(strict)
    assert "notes.append" not in view
    with pytest.raises(ToolNotResolvable, match=r"ticket\.close.*shadow\.yaml"):
        view.resolve("ticket.close")  # still denied, by the first policy's rule


def test_manifest_is_the_shared_contract() -> None:
    policy = load_policy("shadow")
    manifest = _registry().manifest(policy)
    assert manifest["policy"] == {"name": "shadow", "mode": "shadow", "hash": policy.hash}
    assert [t["id"] for t in manifest["tools"]] == [
        "ticket.get",
        "kb.search",
        "reply.draft",
        "notes.append",
    ]
    for entry in manifest["tools"]:
        assert set(entry) == MANIFEST_KEYS
        assert entry["schema_hash"] == schema_hash(entry["schema"])
    json.dumps(manifest, allow_nan=False)  # plain JSON


def test_manifest_tools_are_recorded_only_and_unsafe_ones_denied() -> None:
    registry = _registry("manifest_tools.yaml")
    lookup = registry.resolve("order.lookup")
    assert (lookup.module, lookup.qualname, lookup.has_code) == (None, None, False)
    assert lookup.line == 5
    assert registry.tool_roots() == []
    reproduce = registry.restrict(load_policy("reproduce"))
    assert reproduce.resolve("order.total").disposition == "recorded"  # pure, but no code
    shadow = registry.restrict(load_policy("shadow"))
    assert shadow.resolve("order.lookup").disposition == "recorded"
    with pytest.raises(ToolNotResolvable, match=r"declared 'write', not an effect class"):
        shadow.resolve("order.refund")


def test_duplicate_tool_id_names_both_definitions() -> None:
    with pytest.raises(InputError) as info:
        _registry("duplicate_tools.yaml")
    message = str(info.value)
    assert "tool id 'ticket.get' is defined twice" in message
    assert "tests/fixtures/helpdesk/hd_tools.py:10" in message
    assert "tests/fixtures/helpdesk/dup_tools.py:6" in message
    assert info.value.exit_code == 2


def test_module_that_cannot_be_imported_names_workflow_line_and_module() -> None:
    path = sys.path.copy()
    with pytest.raises(InputError) as info:
        _registry("missing_module.yaml")
    error = info.value
    assert error.fields["file"].endswith("missing_module.yaml")
    assert error.fields["line"] == 5
    assert error.fields["field"] == "tools[1]"
    assert "'no_such_tools_module'" in str(error)
    assert sys.path == path  # the temporary import path is removed again


def test_module_with_an_invalid_tool_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        _registry("broken_module.yaml")
    message = str(info.value)
    assert "broken_tools" in message
    assert "parameter 'when'" in message
    assert info.value.fields["line"] == 3


def test_each_workflow_gets_the_module_of_its_own_folder() -> None:
    first = _registry()
    other = registry_for_workflow(
        load_workflow(ROOT / "tests" / "fixtures" / "helpdesk_other" / "other.yaml")
    )
    assert other.ids() == ["weather.get"]
    assert "ticket.get" in first
    assert _registry().ids() == first.ids()  # and back again


def _manifest_workflow(tmp_path: Path, manifest: object | str) -> Path:
    text = manifest if isinstance(manifest, str) else json.dumps(manifest, indent=2)
    (tmp_path / "tools.json").write_text(text)
    wf = tmp_path / "wf.yaml"
    wf.write_text("name: w\nversion: '1'\ntools: [tools.json]\nsteps: [{id: a, tool: a.b}]\n")
    return wf


@pytest.mark.parametrize(
    ("manifest", "needle"),
    [
        ({"tools": [{"id": "a.b", "colour": "red"}]}, "unknown key 'colour'"),
        (
            {"tools": [{"id": "a.b", "schema": {"type": "object"}, "schema_hash": "0" * 64}]},
            "does not match its schema",
        ),
        ({"tools": [{"id": "a b"}]}, "is not a tool id"),
        ({"tools": [{"effect": "read"}]}, "string 'id'"),
        ({"tool": []}, "unknown key 'tool'"),
        ('{"tools": [\n  {"id": "a.b",}\n]}', "not JSON"),
    ],
)
def test_bad_manifests_are_input_errors(tmp_path: Path, manifest: object, needle: str) -> None:
    with pytest.raises(InputError, match=needle) as info:
        registry_for_workflow(load_workflow(_manifest_workflow(tmp_path, manifest)))
    assert info.value.fields["file"] == str(tmp_path / "tools.json")


def test_missing_manifest_names_the_workflow_entry(tmp_path: Path) -> None:
    wf = tmp_path / "wf.yaml"
    wf.write_text("name: w\nversion: '1'\ntools:\n  - gone.json\nsteps: [{id: a, tool: a.b}]\n")
    with pytest.raises(InputError, match=r"cannot read tool manifest 'gone\.json'") as info:
        registry_for_workflow(load_workflow(wf))
    assert (info.value.fields["file"], info.value.fields["line"]) == (str(wf), 4)


def test_copied_registry_manifest_is_accepted_as_code_free(tmp_path: Path) -> None:
    manifest = _registry().manifest(load_policy("reproduce"))
    registry = registry_for_workflow(load_workflow(_manifest_workflow(tmp_path, manifest)))
    assert all(not tool.has_code for tool in registry)
    assert (
        registry.schema_hashes() == _registry().restrict(load_policy("reproduce")).schema_hashes()
    )
