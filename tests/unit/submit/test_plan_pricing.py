"""A price for every model before anything runs, and ``check`` agreeing with
``submit --dry-run``.

On main a program step whose model the price table lacked passed ``check`` (exit 0) and
``submit --dry-run`` (exit 0, "up to 0 model calls"), then every run's first call was refused
and reported ``ceiling_reached``. Now both refuse it (exit 2) naming the model and the fixes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.ledger import Ledger

TOOLS = """\
from runner.sdk import Effect, tool


@tool("p.echo", effect=Effect.PURE, description="Echo.")
def echo(text: str) -> str:
    return text
"""
MODEL = """\
def respond(request):
    return {"id": "c", "model": "local-llm-7b", "choices": [{"message": {"role": "assistant",
            "content": "ok"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
"""
PROGRAM = """\
def run(task_input):
    return "ok"
"""


def _project(tmp_path: Path, step_extra: str = "", model: str = "") -> Path:
    (tmp_path / "ptools.py").write_text(TOOLS)
    (tmp_path / "local_model.py").write_text(MODEL)
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "tasks.jsonl").write_text('{"task_id": "t1", "input": {"q": "hi"}}\n')
    model = model or "{provider: scripted, function: local_model:respond, name: local-llm-7b}"
    for version in ("1", "2"):
        (tmp_path / f"v{version}.yaml").write_text(
            f'name: prog\nversion: "{version}"\ntools: [ptools]\nmodel: {model}\n'
            f"steps:\n  - id: agent\n    program: prog:run\n    tools: [p.echo]\n{step_extra}"
        )
    return tmp_path


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def _dry_run(cli: CliRunner, *extra: str) -> tuple[int, str]:
    args = ["submit", "--variant", "v1.yaml", "--variant", "v2.yaml", "--tasks", "tasks.jsonl"]
    result = cli.invoke(app, [*args, "--dry-run", *extra])
    return result.exit_code, result.output


def test_an_unpriced_program_model_is_refused_by_check_and_the_dry_run(
    tmp_path: Path, cli: CliRunner
) -> None:
    _project(tmp_path)
    check = cli.invoke(app, ["check", "v1.yaml"])
    assert check.exit_code == 2, check.output
    assert "model 'local-llm-7b'" in check.output and "has no price" in check.output
    assert "--price local-llm-7b=IN/OUT" in check.output and "prices:" in check.output
    code, output = _dry_run(cli)
    assert code == 2, output
    assert "model 'local-llm-7b'" in output and "replay USD ceiling (10" in output
    assert not (tmp_path / "state" / "ledger.sqlite3").exists()


def test_a_price_flag_or_no_usd_ceiling_lets_it_through_and_the_plan_names_the_model(
    tmp_path: Path, cli: CliRunner
) -> None:
    _project(tmp_path)
    assert cli.invoke(app, ["check", "v1.yaml", "--price", "local-llm-7b=0.1/0.2"]).exit_code == 0
    code, output = _dry_run(cli, "--price", "local-llm-7b=0.1/0.2")
    assert code == 0, output
    assert "models local-llm-7b (step agent: workflow model)" in output
    assert "(scripted)" not in output  # the model, never the provider kind
    assert "local-llm-7b: ~$0.0004 per call" in output  # 2000 x 0.1 + 1024 x 0.2, per million
    policy = tmp_path / "nousd.yaml"
    policy.write_text(
        "name: nousd\nmode: shadow\ndeny_effects: [unsafe]\nceilings: {replay: {runs: 10}}\n"
    )
    assert cli.invoke(app, ["check", "v1.yaml", "--policy", str(policy)]).exit_code == 0
    assert _dry_run(cli, "--policy", str(policy))[0] == 0
    bad = cli.invoke(app, ["check", "v1.yaml", "--price", "local-llm-7b=cheap"])
    assert bad.exit_code == 2 and "MODEL=IN/OUT" in bad.output


def test_a_program_step_declares_its_models_or_they_are_unknown(
    tmp_path: Path, cli: CliRunner
) -> None:
    _project(tmp_path, model="{provider: scripted, function: local_model:respond}")
    check = cli.invoke(app, ["check", "v1.yaml"])
    assert check.exit_code == 2 and "the models this step calls are unknown" in check.output
    _project(
        tmp_path,
        step_extra="    models: [gpt-4.1-mini]\n",
        model="{provider: scripted, function: local_model:respond}",
    )
    assert cli.invoke(app, ["check", "v1.yaml"]).exit_code == 0
    code, output = _dry_run(cli)
    assert code == 0 and "models gpt-4.1-mini (step agent: models:)" in output


def test_recorded_traces_tell_the_models_and_calls_of_a_program_step(
    tmp_path: Path, cli: CliRunner
) -> None:
    _project(tmp_path, model="{provider: scripted, function: local_model:respond}")
    trace = tmp_path / "recorded.jsonl"
    lines = [
        {"v": 1, "type": "run", "workflow": {"name": "prog", "version": "1"}},
        *(
            {"v": 1, "type": "call", "tool": "model", "request": {"model": "gpt-4.1-nano"}}
            for _ in range(3)
        ),
        {"v": 1, "type": "end", "status": "succeeded"},
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with Ledger.for_state_dir(tmp_path / "state") as ledger:
        ledger.create_job("record-1", {}, {})
        ledger.start_run("record-1", "prog@1", "t1", 1, "live", key="k1")
        ledger.finish_run("k1", "succeeded", trace_path=str(trace))
    assert cli.invoke(app, ["check", "v1.yaml"]).exit_code == 0
    result = cli.invoke(
        app,
        ["submit", "--variant", "v1.yaml", "--tasks", "tasks.jsonl", "--dry-run", "--json"],
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout[result.stdout.index("{") :])["plan"]
    (step,) = plan["variants"][0]["model_steps"]
    assert step == {
        "step": "agent",
        "models": ["gpt-4.1-nano"],
        "source": "recorded traces",
        "calls_per_run": 3,
    }
    assert plan["variants"][0]["max_model_calls_per_run"] == 3
    assert plan["estimate"]["per_run"]["prog@1"]["usd"] > 0


def test_check_and_the_dry_run_agree_on_a_tool_the_reading_cannot_decide(
    tmp_path: Path, cli: CliRunner
) -> None:
    """N12: a tool whose effect is not a literal is unsafe to ``check`` (fail closed); the dry
    run said 0 on the same input, leaving it to a sandbox that a dry run never starts."""
    _project(tmp_path)
    (tmp_path / "ptools.py").write_text(
        TOOLS.replace("effect=Effect.PURE", "effect=getattr(Effect, 'PURE')")
    )
    check = cli.invoke(app, ["check", "v1.yaml", "--price", "local-llm-7b=0.1/0.2"])
    code, output = _dry_run(cli, "--price", "local-llm-7b=0.1/0.2")
    assert check.exit_code == 3, check.output
    assert code == check.exit_code, output


def test_a_named_model_step_prices_the_embedding_models_it_declares_too(
    tmp_path: Path, cli: CliRunner
) -> None:
    # an embeddings request keeps its own model (the step's name replaces chat models only):
    # declared in models:, it is priced before anything runs like the step's model
    _project(tmp_path, step_extra="    models: [embed-unpriced-1]\n")
    check = cli.invoke(app, ["check", "v1.yaml", "--price", "local-llm-7b=0.1/0.2"])
    assert check.exit_code == 2 and "model 'embed-unpriced-1'" in check.output, check.output
    priced = ["--price", "local-llm-7b=0.1/0.2", "--price", "embed-unpriced-1=0.02/0"]
    assert cli.invoke(app, ["check", "v1.yaml", *priced]).exit_code == 0
