"""``submit`` tells its backend how many runs are coming (the warm pool's budget).

No Docker: the runs are stubbed; the backend records what it was told. A resumed job counts
only the episodes still to run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.ledger import Amount
from runner.settings import Settings
from runner.submit import job as submit_module
from runner.submit import pairs as pairs_module
from runner.submit.options import SubmitOptions
from tests.support.fakes import StubBackend, without_description
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


def test_submit_tells_the_backend_how_many_runs_are_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told: list[int] = []
    runs: list[str] = []

    def run_pair(self: Any, variant: str, task_id: str, key: str) -> tuple[str, Any, Amount]:
        assert told, "the runs started before the backend was told how many are coming"
        runs.append(key)
        return "succeeded", None, Amount()

    monkeypatch.setattr(pairs_module.PairRunner, "run_pair", run_pair)
    without_description(monkeypatch)
    backend = StubBackend()
    told = backend.expected
    options = SubmitOptions(
        variants=(FIX / "a.yaml", FIX / "b.yaml"),
        names=(None, None),
        tasks=FIX / "tasks.jsonl",
        cwd=FIX,
    )
    settings = Settings(state_dir=tmp_path / "state")
    plan = submit_module.prepare(options, settings)
    submit_module.execute(
        plan, options, settings, backend_factory=lambda: backend, handle_signals=False
    )
    assert told == [len(plan.episodes)] and len(runs) == len(plan.episodes) > 1
