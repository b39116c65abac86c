"""A model call refused by a ceiling ends the episode ``ceiling_reached``, in the trace too.

The metering wrapper (`runner.providers.metered.MeteredProvider`) refuses a turn whose
reservation would pass the replay ceiling; the runtime then fails the agent step with the
``CeilingReached`` class. The host, which witnessed the refusal, classifies the episode
``ceiling_reached`` (SPEC.md statuses): the trace's ``end`` line, the ledger and the report agree.
The sandbox here is the real runtime run as a local process (tests/support/fakes.py: not a sandbox).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.domain.ids import sequential_ids
from runner.domain.tasks import Task
from runner.domain.workflow import load_workflow
from runner.episode.driver import run_episode
from runner.episode.request import EpisodeRequest
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger
from runner.providers.metered import MeteredProvider, StopSignal
from runner.providers.scripted import ScriptedProvider
from runner.settings import Settings
from runner.trace.format import episode_exit_code, failure_signature
from tests.support.fakes import SubprocessBackend
from tests.support.paths import REPO

SCHEMA_VALIDATOR = pytest.importorskip("jsonschema").Draft202012Validator(
    json.loads((REPO / "docs" / "trace.schema.json").read_text())
)

WORKFLOW = """\
name: metered
version: "1"
tools: []
model: {provider: scripted, function: "m:f"}
steps:
  - id: answer
    agent: {tools: [], max_turns: 3}
"""


class _NoTools:
    def manifest(self, policy: Any) -> dict[str, Any]:
        return {"policy": {"name": "shadow", "mode": "shadow", "hash": "p"}, "tools": []}

    def tool_roots(self) -> list[Path]:
        return []


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "scripted-1",
        "choices": [{"message": {"role": "assistant", "content": "done"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.for_state_dir(tmp_path / "ledger")
    led.create_job("job", {}, {})
    yield led
    led.close()


def _run(
    tmp_path: Path, ledger: Ledger, ceiling: Ceiling, spent: Amount | None = None
) -> SimpleNamespace:
    wf = tmp_path / "wf.yaml"
    wf.write_text(WORKFLOW)
    policy = SimpleNamespace(
        name="shadow",
        mode="shadow",
        hash="p",
        prices={"scripted-*": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 1.0}},
        limits=SimpleNamespace(timeout_s=30, memory_mb=256, pids_limit=64, cpus=1.0, tmpfs_mb=16),
    )
    request = EpisodeRequest(
        workflow=load_workflow(wf),
        task=Task(task_id="t1", input={"q": "hi"}),
        policy=policy,
        registry=_NoTools(),
        image="img:1",
    )
    settings = Settings(state_dir=tmp_path / "state")
    backend = SubprocessBackend(
        [sys.executable, "-u", "-m", "runner.runtime"],
        cwd=tmp_path,
    )
    stop = StopSignal()
    guard = CeilingGuard(ledger, "job", {"replay": ceiling})
    if spent is not None:  # an earlier run's calls, settled: what is left is less than a call
        guard.settle(guard.reserve("replay", spent, key="earlier", kind="model_call"), spent)
    metered = MeteredProvider(
        ScriptedProvider(_answer),
        guard,
        stop,
        policy.prices,
        model="scripted-1",
        variant="v",
        task_id="t1",
        run_key="job/v/t1/1",
        max_tokens=16,
    )
    result = run_episode(
        request, backend=backend, settings=settings, provider=metered, id_factory=sequential_ids()
    )
    lines = [json.loads(x) for x in result.trace_path.read_text().splitlines()]
    for line in lines:
        errors = [e.message for e in SCHEMA_VALIDATOR.iter_errors(line)]
        assert not errors, (line["type"], errors)
    return SimpleNamespace(result=result, lines=lines, metered=metered, stop=stop)


def test_a_refused_model_call_ends_the_trace_ceiling_reached(
    tmp_path: Path, ledger: Ledger
) -> None:
    # 10,000 tokens, 9,995 of them charged: the first turn's estimate is larger than what is
    # left, not than the whole ceiling (a call larger than that is refused alone: N05)
    spent = Amount(tokens_in=9_995)
    run = _run(tmp_path, ledger, Ceiling(tokens=10_000), spent)
    assert run.metered.refused == 1 and run.stop.reason == "ceiling_reached"
    assert run.result.status == "ceiling_reached"
    end = run.lines[-1]
    assert end["status"] == "ceiling_reached" and end["exit_code"] == 1
    assert end["failure"] == {
        "call_index": 0,
        "tool": "model",
        "error_class": "CeilingReached",
        "exit_code": episode_exit_code("ceiling_reached"),
    }
    assert end["failure_signature"] == failure_signature(0, "model", "CeilingReached", 1)
    assert "model call 0 refused" in end["reason"] and "replay ceiling" in end["reason"]
    assert end["error"]["class"] == "CeilingReached"  # what the runtime raised, kept
    calls = [line for line in run.lines if line["type"] == "call"]
    assert [c["error"]["class"] for c in calls] == ["CeilingReached"]
    assert end["meter"]["model_calls"] == 1 and end["meter"]["tokens_in"] == 0
    assert ledger.committed("job", "replay") == spent  # nothing was forwarded or charged


def test_a_forwarded_model_call_under_the_ceiling_is_not_ceiling_reached(
    tmp_path: Path, ledger: Ledger
) -> None:
    run = _run(tmp_path, ledger, Ceiling(tokens=100_000))
    assert run.metered.refused == 0 and not run.stop.is_set()
    assert run.result.status == "succeeded" and run.lines[-1]["status"] == "succeeded"
    assert run.lines[-1]["output"] == "done"
