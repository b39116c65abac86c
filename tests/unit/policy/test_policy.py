"""Policies: lookup order, strict validation with lines, hash, limits/ceilings/prices, decisions."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import resources
from runner.domain.registry import ToolSpec
from runner.errors import InputError
from runner.policy import PolicySpec, decide, load_policy, policy_from_spec
from runner.sdk import Effect
from tests.support.paths import REPO

ROOT = REPO


def _tool(tool_id: str, effect: Effect, has_code: bool = True) -> ToolSpec:
    return ToolSpec(
        id=tool_id,
        effect=effect,
        declared_effect=effect.value,
        description="",
        schema={"type": "object"},
        schema_hash="h",
        module="m" if has_code else None,
        qualname="f" if has_code else None,
        file="m.py",
        line=1,
        origin="m",
    )


def test_packaged_defaults_are_the_canonical_files() -> None:
    for name in ("shadow", "reproduce"):
        packaged = resources.policies_dir() / f"{name}.yaml"
        assert packaged.read_text() == (ROOT / "policies" / f"{name}.yaml").read_text()
        policy = load_policy(resources.policies_dir() / f"{name}.yaml")
        assert policy.name == name
        assert policy.mode == name


def test_shadow_and_reproduce_defaults() -> None:
    shadow = load_policy("shadow")
    assert shadow.spec.deny_effects == [Effect.UNSAFE]
    assert shadow.limits.timeout_s == 300
    assert shadow.limits.memory_mb == 512
    assert shadow.limits.pids_limit == 128
    assert shadow.limits.cpus == 1.0
    assert shadow.limits.tmpfs_mb == 64
    assert shadow.ceilings.replay.usd is not None
    assert shadow.ceilings.judge.usd is not None
    assert shadow.ceilings.for_purpose("judge") is shadow.ceilings.judge
    reproduce = load_policy("reproduce")
    assert reproduce.spec.deny_effects == []
    assert len(shadow.hash) == 64
    assert shadow.hash != reproduce.hash


def test_prices_exact_then_longest_glob() -> None:
    policy = load_policy("shadow")
    mini = policy.spec.price_for("gpt-4.1-mini-2025-04-14")
    full = policy.spec.price_for("gpt-4.1-2025-04-14")
    assert mini is not None and full is not None
    assert (mini.input_usd_per_mtok, mini.output_usd_per_mtok) == (0.40, 1.60)
    assert (full.input_usd_per_mtok, full.output_usd_per_mtok) == (2.00, 8.00)
    assert full.cost_usd(1_000_000, 500_000) == pytest.approx(6.0)
    assert policy.spec.price_for("unheard-of-model") is None


def test_local_policies_folder_wins_over_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "policies").mkdir()
    text = (ROOT / "policies" / "shadow.yaml").read_text().replace("timeout_s: 300", "timeout_s: 7")
    (tmp_path / "policies" / "shadow.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    policy = load_policy("shadow")
    assert policy.limits.timeout_s == 7
    assert policy.source == "policies/shadow.yaml"
    assert load_policy("reproduce").path == resources.policies_dir() / "reproduce.yaml"


def test_a_path_works(tmp_path: Path) -> None:
    path = tmp_path / "strict.yaml"
    path.write_text("name: strict\nmode: shadow\ndeny_effects: [unsafe, local]\n")
    policy = load_policy(path)
    assert policy.spec.deny_effects == [Effect.UNSAFE, Effect.LOCAL]
    assert load_policy(str(path)).hash == policy.hash


def test_unknown_name_lists_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"no policy 'nope'.*reproduce, shadow") as info:
        load_policy("nope")
    assert info.value.exit_code == 2
    with pytest.raises(InputError, match="not found"):
        load_policy(tmp_path / "missing.yaml")


def test_unknown_key_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nmode: shadow\nlimits:\n  timeout_s: 10\n  memroy_mb: 64\n")
    with pytest.raises(InputError) as info:
        load_policy(path)
    error = info.value
    assert error.fields["line"] == 5
    assert error.fields["field"] == "limits.memroy_mb"
    assert "unknown key 'memroy_mb' (did you mean 'memory_mb'?)" in str(error)
    assert str(error).startswith(f"{path}:5: limits.memroy_mb: ")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: p\nmode: shadow\ndeny_effects: []\n", "must deny the unsafe effect class"),
        ("name: p\nmode: live\n", "mode"),
        ("name: p\nmode: shadow\ndeny_effects: [wrtie]\n", "deny_effects[0]"),
        ("name: p\nmode: shadow\ntools: {deny: ['a b']}\n", "not a tool id or glob"),
        ("name: p\nmode: shadow\nceilings: {replay: {usd: -1}}\n", "ceilings.replay.usd"),
        ("name: p\nmode: shadow\nprices: {m: {input_usd_per_mtok: 1}}\n", "output_usd_per_mtok"),
        ("- just\n- a list\n", "mapping"),
        ("name: p\nmode: [shadow\n", "invalid YAML"),
    ],
)
def test_invalid_policies_are_input_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_policy(path)
    assert needle in str(info.value)
    assert info.value.fields["file"] == str(path)


def test_hash_is_of_the_content_not_the_formatting(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    two = tmp_path / "two.yaml"
    three = tmp_path / "three.yaml"
    one.write_text("name: p\nmode: shadow\nlimits: {timeout_s: 10, cpus: 2}\n")
    two.write_text("# comment\nlimits:\n  cpus: 2.0\n  timeout_s: 10.0\nmode: shadow\nname: p\n")
    three.write_text("name: p\nmode: shadow\nlimits: {timeout_s: 11, cpus: 2}\n")
    assert load_policy(one).hash == load_policy(two).hash
    assert load_policy(one).hash != load_policy(three).hash


def _spec(**fields: object) -> PolicySpec:
    return PolicySpec.model_validate({"name": "t", "mode": "shadow", **fields})


@pytest.mark.parametrize(
    ("effect", "allowed", "disposition", "rule"),
    [
        (Effect.PURE, True, "execute", "allow effect pure"),
        (Effect.LOCAL, True, "execute", "allow effect local"),
        (Effect.READ, True, "recorded", "allow effect read"),
        (Effect.UNSAFE, False, None, "deny effect unsafe"),
    ],
)
def test_shadow_decisions(effect: Effect, allowed: bool, disposition: str, rule: str) -> None:
    decision = decide(_spec(), "p.yaml", _tool("t.x", effect))
    assert (decision.allowed, decision.disposition, decision.rule) == (allowed, disposition, rule)
    assert decision.source == "p.yaml"


@pytest.mark.parametrize(
    ("effect", "disposition"),
    [
        (Effect.PURE, "execute"),
        (Effect.LOCAL, "recorded"),
        (Effect.READ, "recorded"),
        (Effect.UNSAFE, "recorded"),
    ],
)
def test_reproduce_decisions(effect: Effect, disposition: str) -> None:
    spec = PolicySpec.model_validate({"name": "r", "mode": "reproduce", "deny_effects": []})
    decision = decide(spec, "r.yaml", _tool("t.x", effect))
    assert decision.allowed and decision.disposition == disposition


def test_tools_without_code_are_always_recorded() -> None:
    spec = PolicySpec.model_validate({"name": "r", "mode": "reproduce", "deny_effects": []})
    for mode_spec in (_spec(), spec):
        decision = decide(mode_spec, "x", _tool("t.x", Effect.PURE, has_code=False))
        assert decision.disposition == "recorded"


def test_overrides_deny_allow_and_unsafe_allow() -> None:
    spec = _spec(
        tools={
            "deny": ["email.*"],
            "allow": ["ticket.*", "email.draft", "kb.*"],
            "unsafe_allow": ["ticket.close"],
        }
    )
    cases = {
        "email.draft": (Effect.PURE, False, 'deny "email.*"'),  # deny wins over allow
        "ticket.get": (Effect.READ, True, "allow effect read"),
        "notes.append": (Effect.LOCAL, False, "not in allow list"),
        "ticket.close": (Effect.UNSAFE, True, 'unsafe_allow "ticket.close"'),
        "ticket.reopen": (
            Effect.UNSAFE,
            False,
            'deny effect unsafe; allow "ticket.*" cannot widen it, use unsafe_allow',
        ),
    }
    for tool_id, (effect, allowed, rule) in cases.items():
        decision = decide(spec, "p", _tool(tool_id, effect))
        assert (decision.allowed, decision.rule) == (allowed, rule), tool_id
    widened = decide(spec, "p", _tool("ticket.close", Effect.UNSAFE))
    assert widened.disposition == "recorded"  # its code never runs in shadow


def test_policy_from_spec_hashes_like_the_loader() -> None:
    loaded = load_policy("shadow")
    again = policy_from_spec(loaded.spec, "elsewhere")
    assert again.hash == loaded.hash
    assert again.summary() == {"name": "shadow", "mode": "shadow", "hash": loaded.hash}
