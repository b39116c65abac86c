"""``submit`` with an image the engine lacks, and a job that fails once its id was shown.

A new user's findings: a variant whose workflow named an image that did not exist printed the
plan (a job id), then exited 6 from the describing sandbox's "create container: image not
found", and the id named nothing (``jobs`` empty, ``--resume`` "no job"). Now every image is
asked once before the plan is shown (exit 2, variant, image and ``image build --tag`` named),
and a job that fails after its id was shown stays listed with its failure. The runtime runs as a
local process (`UnsandboxedProcessBackend`: no Docker); the engine's answers are faked.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from runner.backends.base import SandboxSpec
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.errors import InfrastructureError, InputError
from runner.settings import Settings
from runner.submit.jobfolder import load_resume
from runner.submit.jobs import find_job, list_jobs
from runner.submit.options import SubmitOptions
from runner.submit.runjob import run_job
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "submit"


class _View:
    """A `JobView` that keeps what it was shown."""

    def __init__(self) -> None:
        self.plans: list[Sequence[str]] = []

    def plan(self, lines: Sequence[str]) -> None:
        self.plans.append(lines)

    def dry_run(self, plan: dict[str, Any]) -> None:
        self.plans.append(["dry run"])

    def progress(self, total: int, finished: int) -> AbstractContextManager[Any]:
        return nullcontext(lambda outcomes: None)

    def report(self, report: Any) -> None:
        pass

    def page(self, report: Any, path: Path) -> Path | None:
        return None

    def say(self, line: str) -> None:
        pass

    def hint(self, line: str) -> None:
        pass


class _Engine(UnsandboxedProcessBackend):
    """An engine that has every image but ``missing`` and counts what it was asked."""

    def __init__(self, missing: set[str], fail_sandbox: bool = False) -> None:
        super().__init__()
        self.missing, self.fail_sandbox = missing, fail_sandbox
        self.asked: list[str] = []

    def image_id(self, image: str) -> str:
        self.asked.append(image)
        if image in self.missing:  # as runner.backends.docker.client.translate says it
            raise InfrastructureError(
                f"inspect image {image}: image not found (No such image: {image})",
                action=f"inspect image {image}",
                status=404,
            )
        return "sha256:" + "1" * 64

    def sandbox(self, spec: SandboxSpec) -> Any:
        if self.fail_sandbox:
            raise InfrastructureError(f"create container {spec.run_id}: the engine broke")
        return super().sandbox(spec)


def _variant(tmp_path: Path, image: str, name: str = "b") -> Path:
    """Variant b of the fixtures in ``image``, beside a copy of their tool module."""
    shutil.copyfile(FIX / "submit_tools.py", tmp_path / "submit_tools.py")
    text = (FIX / "b.yaml").read_text() + f"image: {image}\n"
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace('version: "b"', f'version: "{name}"'))
    return path


def _submit(tmp_path: Path, engine: _Engine, *variants: Path, dry_run: bool = False) -> _View:
    view = _View()
    options = SubmitOptions(
        variants=(FIX / "a.yaml", *variants),
        names=(None,) * (1 + len(variants)),
        tasks=FIX / "tasks.jsonl",
        cwd=FIX,  # the tool modules resolve here
    )
    run_job(
        Settings(state_dir=tmp_path / "state", pool=False),
        options,
        view=view,
        backend_factory=lambda: engine,
        probe=True,
        dry_run=dry_run,
        backend_name="docker",
    )
    return view


def test_a_missing_image_is_exit_2_before_the_plan_naming_variant_image_and_fix(
    tmp_path: Path,
) -> None:
    engine = _Engine({"mine:nosuch"})
    one, two = _variant(tmp_path, "mine:nosuch", "b"), _variant(tmp_path, "mine:nosuch", "c")
    view = None
    with pytest.raises(InputError) as caught:
        view = _submit(tmp_path, engine, one, two)
    error = caught.value
    assert error.exit_code == 2 and error.fields["field"] == "image"
    text = str(error)
    assert "variant fixture@b" in text and "variant fixture@c" in text, text
    assert f"{one}:9 image:" in text and "fixture@a" not in text  # a's image exists
    assert "sandbox-replay image build --tag mine:nosuch" in text
    # each image asked once: the default image (variant a) and mine:nosuch (b and c)
    assert sorted(engine.asked) == sorted(["sandbox-replay:latest", "mine:nosuch"])
    assert view is None and not (tmp_path / "state" / "jobs").exists()
    assert list_jobs(Settings(state_dir=tmp_path / "state")) == []
    with pytest.raises(InputError):  # a dry run would have shown a plan that cannot run
        _submit(tmp_path, _Engine({"mine:nosuch"}), one, dry_run=True)


def test_an_engine_that_cannot_be_asked_stays_exit_6(tmp_path: Path) -> None:
    class Broken(_Engine):
        def image_id(self, image: str) -> str:
            raise InfrastructureError("inspect image: Docker engine answered 500: boom", status=500)

    with pytest.raises(InfrastructureError):
        _submit(tmp_path, Broken(set()), _variant(tmp_path, "mine:1"))


def test_a_job_that_fails_after_its_plan_was_shown_stays_listed_with_its_failure(
    tmp_path: Path,
) -> None:
    engine = _Engine(set(), fail_sandbox=True)  # the describing sandbox cannot start
    with pytest.raises(InfrastructureError, match="the engine broke"):
        _submit(tmp_path, engine, _variant(tmp_path, "mine:1"))
    settings = Settings(state_dir=tmp_path / "state")
    (entry,) = list_jobs(settings)
    assert entry.status == "failed" and entry.exit_code == 6, entry
    assert entry.error is not None and "the engine broke" in entry.error
    assert entry.variants == ("fixture@a", "fixture@b") and entry.tasks == 4
    assert find_job(settings, entry.id) == entry  # `jobs show` opens it
    with pytest.raises(InputError, match="failed before any run started"):
        load_resume(settings, entry.id)
