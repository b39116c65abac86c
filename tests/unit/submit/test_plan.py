"""The submit plan: N x M runs, ceilings with their sources, cost estimates, job files."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.backends.capacity import HostResources
from runner.errors import InputError
from runner.ledger import Amount, Ledger, RunHistory
from runner.settings import Settings
from runner.submit.job import prepare
from runner.submit.options import CeilingFlags, SubmitOptions, load_job_file
from runner.submit.plan import DEFAULT_MAX_TOKENS, NOMINAL_PROMPT_TOKENS
from tests.support.fakes import StubBackend
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


def options(*names: str, **kwargs: object) -> SubmitOptions:
    return SubmitOptions(
        variants=tuple(FIX / n for n in names),
        names=(None,) * len(names),
        tasks=FIX / "tasks.jsonl",
        cwd=FIX,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state", concurrency=2)


def test_three_variants_by_four_tasks_is_twelve_runs_task_major(settings: Settings) -> None:
    plan = prepare(options("a.yaml", "b.yaml", "c.yaml"), settings, job_id="job-1")
    assert len(plan.pairs) == 12
    assert plan.pairs[:3] == [("fixture@a", "t1"), ("fixture@b", "t1"), ("fixture@c", "t1")]
    text = "\n".join(plan.lines())
    assert "3 variants x 4 tasks = 12 runs" in text
    assert "most expensive rung: 12 sandboxes" in text
    assert "judge rubric: 4 groups, each shown in a shuffled order (seed " in text
    assert "; graded on the host" in text
    data = plan.to_json()
    assert data["runs"] == 12 and data["judge"]["model_calls"] == 0
    assert data["repeats"] == 1 and isinstance(data["seed"], int)
    assert not (settings.state_dir / "ledger.sqlite3").exists()  # planning writes nothing


def test_repeats_multiply_runs_estimate_and_judge_calls(settings: Settings) -> None:
    plan = prepare(
        options("a.yaml", "b.yaml", repeats=3, seed=5, judge="model:gpt-4.1-mini"),
        settings,
        job_id="job-1",
    )
    once = prepare(options("a.yaml", "b.yaml"), settings, job_id="job-1")
    assert plan.runs == 24 and len(plan.episodes) == 24 and len(set(plan.episodes)) == 24
    # task-major, then repeat, then variant: whole groups first
    assert plan.episodes[:4] == [
        ("fixture@a", "t1", 0),
        ("fixture@b", "t1", 0),
        ("fixture@a", "t1", 1),
        ("fixture@b", "t1", 1),
    ]
    data = plan.to_json()
    assert data["formula"] == "2 variants x 4 tasks x 3 repeats = 24 runs"
    assert (data["runs"], data["repeats"], data["seed"]) == (24, 3, 5)
    assert plan.replay_estimate.runs == 3 * once.replay_estimate.runs
    assert plan.judge_calls == 2 * 4 * 3  # a model judge: every group in two orders
    text = "\n".join(plan.lines())
    assert "24 sandboxes, one per (variant, task, repeat)" in text
    assert "12 groups, each shown in a shuffled order (seed 5)" in text
    # the seed is derived from the job id when not given: the same for a resumed job
    assert once.seed == prepare(options("a.yaml", "b.yaml"), settings, job_id="job-1").seed
    assert once.seed != prepare(options("a.yaml", "b.yaml"), settings, job_id="job-2").seed


def test_flags_override_policy_ceilings_and_say_so(settings: Settings) -> None:
    flags = CeilingFlags(
        {"runs": 5, "usd": 0.5}, {"runs": "--ceiling-runs", "usd": "--ceiling-usd"}
    )
    plan = prepare(options("a.yaml", "b.yaml", replay_ceiling=flags), settings, job_id="job-1")
    replay = plan.ceilings["replay"]
    assert replay.ceiling.runs == 5 and replay.ceiling.usd == 0.5
    assert replay.sources["runs"] == "--ceiling-runs"
    assert replay.sources["tokens"] == "policy shadow"  # not overridden: the policy's
    assert plan.to_json()["ceilings"]["replay"]["runs"] == {"value": 5, "source": "--ceiling-runs"}
    text = "\n".join(plan.lines())
    assert "runs 5 (--ceiling-runs)" in text
    assert "allows 5 of 8 runs" in text


def test_upper_bound_estimate_without_history_and_history_when_there_is(
    settings: Settings,
) -> None:
    plan = prepare(options("agent.yaml", "a.yaml"), settings, job_id="job-1")
    per_run = plan.per_run["fixture@agent"]
    assert per_run.tokens_in == 3 * NOMINAL_PROMPT_TOKENS
    assert per_run.tokens_out == 3 * DEFAULT_MAX_TOKENS
    # gpt-4.1-mini* costs 0.40 / 1.60 USD per million tokens in the default policy
    assert per_run.usd == pytest.approx((6000 * 0.4 + 3072 * 1.6) / 1e6)
    assert plan.per_run["fixture@a"].usd == 0.0 and "upper bound" in plan.basis
    from runner.submit.plan import build_plan

    history = RunHistory(runs=7, per_run=Amount(runs=1, usd=0.25, sandbox_s=2.0))
    again = build_plan(
        "job-2",
        plan.policy,
        plan.variants,
        plan.tasks,
        judge="rubric",
        concurrency=2,
        ceilings=plan.ceilings,
        history={"fixture@agent": history, "fixture@a": history},
    )
    assert again.replay_estimate.usd == pytest.approx(0.25 * 8)
    assert again.basis == "mean of each variant's earlier runs: fixture@agent 7, fixture@a 7"
    assert again.typical_sandbox_s == pytest.approx(2.0)


def test_each_variant_is_estimated_from_its_own_earlier_runs(settings: Settings) -> None:
    """Another workflow's runs say nothing of this one's (a user's `run v2.yaml` made the plan
    of v1 and v2 both "mean of 1 earlier runs", v1's estimate taken from v2's run)."""
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        ledger.create_job("old", plan={}, settings={})
        ledger.reserve(
            "k1", "old", "replay", Amount(runs=1, sandbox_s=9.0), kind="run", variant="fixture@a"
        )
        ledger.settle("k1", Amount(runs=1, usd=0.5, sandbox_s=3.0))
    again = prepare(options("agent.yaml", "a.yaml"), settings, job_id="job-2")
    assert again.per_run["fixture@a"].usd == pytest.approx(0.5)
    assert again.per_run["fixture@agent"].tokens_in == 3 * NOMINAL_PROMPT_TOKENS  # upper bound
    assert again.basis.startswith("mean of each variant's earlier runs: fixture@a 1; upper bound")
    assert again.typical_sandbox_s == pytest.approx(3.0)


def test_model_judge_calls_are_planned_and_priced(settings: Settings) -> None:
    plan = prepare(options("a.yaml", "b.yaml", judge="model:gpt-4.1-mini"), settings, job_id="j")
    assert plan.judge_calls == 8 and plan.judge_estimate.usd > 0  # 4 groups, two orders each
    with pytest.raises(InputError, match="no price"):
        prepare(options("a.yaml", "b.yaml", judge="model:unknown-model"), settings, job_id="j")


def test_unpriced_openai_model_is_an_error(tmp_path: Path, settings: Settings) -> None:
    policy = tmp_path / "noprice.yaml"
    policy.write_text("name: noprice\nmode: shadow\nprices: {}\n")
    with pytest.raises(InputError, match="shadow evaluation must not look free"):
        prepare(options("agent.yaml", policy=str(policy)), settings, job_id="j")


def test_same_variant_name_twice_is_an_error(settings: Settings) -> None:
    with pytest.raises(InputError, match="both named 'fixture@a'"):
        prepare(options("a.yaml", "a.yaml"), settings, job_id="j")


def _Engine(memory_bytes: int) -> StubBackend:
    """An engine that tells its memory (what ``docker info`` gives as ``MemTotal``)."""
    return StubBackend(memory_bytes=memory_bytes)


def test_concurrency_above_the_cpus_is_admitted_within_the_memory_budget(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 128 on a 2-core machine was refused (2x CPUs); now the engine's memory bounds it
    roomy = HostResources(pids_free=10**7, nproc_free=None, fds_free=10**6)
    monkeypatch.setattr(HostResources, "read", classmethod(lambda cls: roomy))
    policy = tmp_path / "nosandboxs.yaml"  # no sandbox-seconds ceiling (bounds runs at once)
    policy.write_text("name: open\nmode: shadow\nceilings: {replay: {runs: 1000}}\n")
    engine = _Engine(24 * 1024**3)
    small = settings.model_copy(update={"memory_mb": 96})
    plan = prepare(
        options("a.yaml", concurrency=128, policy=str(policy)), small, job_id="j", engine=engine
    )
    assert plan.concurrency == 128 and plan.capacity is not None
    assert plan.capacity.bounds[0].runs == int(0.75 * 24 * 1024 / 96)  # 192
    # at the default 512 MiB the budget admits fewer, and the plan says which bound and why
    plan = prepare(
        options("a.yaml", concurrency=128, policy=str(policy)), settings, job_id="j", engine=engine
    )
    assert plan.concurrency == 36  # floor(0.75 x 24 GiB / 512 MiB)
    line = next(x for x in plan.lines() if x.startswith("  concurrency:"))
    assert "36 at once (asked 128; bound by memory: 0.75 x 24.0 GiB engine memory / 512 MiB" in line
    assert plan.to_json()["concurrency_bound"]["binding"] == "memory"


def test_job_file_paths_names_and_ceiling_sources() -> None:
    opts = load_job_file(FIX / "job.yaml")
    assert opts.variants == (FIX / "a.yaml", FIX / "b.yaml")
    assert opts.names == (None, "challenger")
    assert opts.tasks == FIX / "tasks.jsonl" and opts.concurrency == 2
    assert opts.replay_ceiling.values == {"runs": 3}
    assert opts.replay_ceiling.sources == {"runs": "job.yaml"}
    merged = opts.with_overrides(
        replay_ceiling=CeilingFlags({"runs": 9}, {"runs": "--ceiling-runs"})
    )
    assert merged.replay_ceiling.values == {"runs": 9}
    assert merged.replay_ceiling.sources == {"runs": "--ceiling-runs"}
    assert SubmitOptions.from_json(merged.to_json()) == merged


def test_job_file_unknown_key_names_file_line_and_field(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("variants: [a.yaml]\ntasks: t.jsonl\nceilings:\n  replay: {runz: 3}\n")
    with pytest.raises(InputError) as info:
        load_job_file(job)
    assert info.value.fields["line"] == 4
    assert "runz" in str(info.value) and str(job) in str(info.value)


def test_a_scripted_model_that_does_not_import_is_invalid_input_at_plan_time(
    settings: Settings,
) -> None:
    with pytest.raises(InputError, match="no_such_model_module"):
        prepare(options("a.yaml", "badmodel.yaml"), settings, job_id="j")
    assert not settings.state_dir.exists()


def test_the_sandbox_seconds_ceiling_does_not_bound_the_runs_at_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on main each running run held its timeout plus grace, so the plan admitted
    # ceiling / 375.7 = 19 of 128; the budget clock shares the ceiling instead
    roomy = HostResources(pids_free=10**7, nproc_free=None, fds_free=10**6)
    monkeypatch.setattr(HostResources, "read", classmethod(lambda cls: roomy))
    small = settings.model_copy(update={"memory_mb": 96})
    plan = prepare(options("a.yaml", concurrency=128), small, job_id="j", engine=_Engine(2**40))
    assert plan.ceilings["replay"].ceiling.sandbox_s is not None
    assert plan.concurrency == 128
    assert plan.capacity is not None and plan.capacity.binding is None
    text = "\n".join(plan.lines())
    assert "128 at once (as asked: nothing here bounds it lower)" in text
    assert "shared by a budget clock, not held per run" in text
