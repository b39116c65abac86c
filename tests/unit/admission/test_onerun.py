"""`runner.admission.onerun`: the steps ``run`` and the anchored fork share, without Docker.

The describing sandbox is skipped (`without_description`) and the episode replaced by a stub
that keeps the request, so what is pinned is what the shared home hands the episode and the
ledger; real runs are tests/integration/test_episode.py and test_fork.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.admission.onerun import read_for_one_run
from runner.domain.ids import timestamped_ids
from runner.episode.request import EpisodeResult
from runner.errors import InputError
from runner.ledger import Ledger
from runner.reproduce.fork import fork_trace
from runner.settings import Settings
from runner.tracetools.anchor import load_anchor
from tests.support.fakes import StubBackend, without_description
from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"
FAILING = HELPDESK / "traces" / "failing.jsonl"


class _SmallEngine(StubBackend):
    def engine_cpus(self) -> float | None:
        return 0.25  # fewer than any policy asks


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state")


@pytest.fixture
def episodes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Any]:
    """The requests the episode was asked to run (it runs nothing)."""
    seen: list[Any] = []

    def fake_episode(request: Any, **kwargs: Any) -> EpisodeResult:
        seen.append(request)
        end = {"status": "succeeded", "meter": {"sandbox_s": 0.0}}
        return EpisodeResult("run-1", "succeeded", tmp_path / "t.jsonl", end)

    monkeypatch.setattr("runner.episode.metered_run.run_episode", fake_episode)
    without_description(monkeypatch)
    return seen


def test_the_image_is_the_workflows_then_the_callers_then_the_settings(
    settings: Settings,
) -> None:
    given = read_for_one_run(
        settings, HELPDESK / "v2.yaml", policy_name="shadow", image="mine:1", exclude=[]
    )
    default = read_for_one_run(
        settings, HELPDESK / "v2.yaml", policy_name="shadow", image=None, exclude=[]
    )
    assert given.workflow.spec.image is None  # the example names none
    assert (given.image, default.image) == ("mine:1", settings.image)
    assert given.policy.name == "shadow" and given.provider is not None


def test_a_run_gets_the_request_fields_and_is_one_replay_job_of_its_command(
    settings: Settings, episodes: list[Any]
) -> None:
    one = read_for_one_run(
        settings, HELPDESK / "v2.yaml", policy_name="shadow", image=None, exclude=[]
    )
    backend = StubBackend()
    registry = one.admit(backend)
    anchor = load_anchor(FAILING, 1)
    result = one.run(
        registry,
        anchor.task,
        backend=backend,
        command="fork",
        id_factory=timestamped_ids(prefix="fork"),
        recorded_calls=list(anchor.prefix),
        fork_at=1,
    )
    assert result.status == "succeeded"
    (request,) = episodes
    assert (request.fork_at, len(request.recorded_calls), request.mode) == (1, 1, "shadow")
    assert request.snapshot is one.snapshot and request.image == one.image
    with Ledger.for_state_dir(settings.state_dir) as ledger:
        totals = ledger.totals()
    assert totals["replay"].committed.runs == 1 and totals["live"].committed.runs == 0


def test_a_fork_asking_more_cpus_than_the_engine_has_is_invalid_input_as_a_run_is(
    settings: Settings, episodes: list[Any]
) -> None:
    """Was: the fork skipped the engine's limits that ``run`` checks, and started the run."""
    with pytest.raises(InputError) as caught:
        fork_trace(FAILING, 1, HELPDESK / "v2.yaml", settings, backend_factory=_SmallEngine)
    assert caught.value.fields["field"] == "limits.cpus" and episodes == []
