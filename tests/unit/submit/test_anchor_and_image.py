"""``submit --anchor TRACE --fork-at K`` and a variant naming its own image, planned (no Docker)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.domain.workflow import load_workflow
from runner.errors import InputError, ReplayRefused
from runner.settings import Settings
from runner.submit.job import check_anchor, prepare
from runner.submit.options import SubmitOptions
from runner.tracetools.anchor import load_anchor
from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"
FAILING = HELPDESK / "traces" / "failing.jsonl"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state", concurrency=2)


def _anchored(*names: str, fork_at: int = 2) -> SubmitOptions:
    return SubmitOptions(
        variants=tuple(HELPDESK / n for n in names),
        names=(None,) * len(names),
        tasks=FAILING,
        cwd=HELPDESK,
        fork_at=fork_at,
    )


def test_the_anchor_is_the_prefix_of_k_calls_and_the_runs_task(settings: Settings) -> None:
    anchor = load_anchor(FAILING, 1)
    assert [c["index"] for c in anchor.prefix] == [0]
    assert anchor.task.task_id == "ticket-1000" and anchor.task.expected is None
    # the recorded reads serve the fresh part: the failing lookup too, as recorded
    assert [o["tool"] for o in anchor.task.observations] == ["ticket.get", "customer.get"]
    assert anchor.task.observations[1]["error"]["class"] == "KeyError"
    assert anchor.task.clock_start == anchor.trace.run.clock.start


@pytest.mark.parametrize("k", [0, 3, -1])
def test_k_out_of_range_is_invalid_input_naming_the_range(k: int) -> None:
    with pytest.raises(InputError) as caught:
        load_anchor(FAILING, k)
    assert f"{k} is out of range" in caught.value.message
    assert "this trace has 2, so K is 1 to 2" in caught.value.message
    assert caught.value.fields["field"] == "--fork-at"


def test_a_prefix_with_a_call_without_response_is_refused(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in FAILING.read_text(encoding="utf-8").splitlines()]
    for key in ("body", "body_encoding"):  # call #0 keeps no response at all
        del lines[1][key]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(ReplayRefused) as caught:
        load_anchor(broken, 1)
    assert "call #0" in caught.value.message


def test_an_anchored_submission_plans_one_task_per_variant_and_says_so(
    settings: Settings,
) -> None:
    plan = prepare(_anchored("v1.yaml", "v4.yaml"), settings, job_id="job-a")
    assert plan.pairs == [
        ("helpdesk-triage@1", "ticket-1000"),
        ("helpdesk-triage@4", "ticket-1000"),
    ]
    text = "\n".join(plan.lines())
    assert "anchored fork: every run replays the first 2 recorded calls of failing.jsonl" in text
    # a failed recording is no answer key: said, where the rubric would rank by status only
    assert "anchored fork: task ticket-1000 has no expectations to grade against" in text
    assert plan.to_json()["anchor"] == {
        "trace": str(FAILING),
        "fork_at": 2,
        "task_id": "ticket-1000",
        "prefix_calls": 2,
        "expected_from": None,
    }
    again = SubmitOptions.from_json(_anchored("v1.yaml", "v4.yaml").to_json())
    assert again.fork_at == 2 and again.anchor == FAILING  # a resumed job forks the same


def test_an_anchored_submission_refuses_k_out_of_range(settings: Settings) -> None:
    with pytest.raises(InputError, match="5 is out of range"):
        prepare(_anchored("v1.yaml", "v4.yaml", fork_at=5), settings, job_id="job-b")


def _with_image(tmp_path: Path, name: str, image: str | None) -> Path:
    folder = tmp_path / name
    shutil.copytree(HELPDESK, folder, ignore=shutil.ignore_patterns("traces", "__pycache__"))
    path = folder / "v1.yaml"
    text = path.read_text(encoding="utf-8").replace('version: "1"', f'version: "{name}"')
    if image is not None:
        text += f"image: {image}\n"
    path.write_text(text, encoding="utf-8")
    return path


def test_each_variant_names_its_image_in_the_plan(tmp_path: Path, settings: Settings) -> None:
    options = SubmitOptions(
        variants=(
            _with_image(tmp_path, "a", "sandbox-replay:sdk-old"),
            _with_image(tmp_path, "b", None),
        ),
        names=(None, None),
        tasks=HELPDESK / "tasks.jsonl",
        cwd=tmp_path,
    )
    plan = prepare(options, settings, job_id="job-c")
    assert [v.image for v in plan.variants] == ["sandbox-replay:sdk-old", None]
    text = "\n".join(plan.lines())
    assert "variant helpdesk-triage@a: v1.yaml, image sandbox-replay:sdk-old," in text
    assert "variant helpdesk-triage@b: v1.yaml, " in text
    assert "helpdesk-triage@b: v1.yaml, image" not in text
    assert [v["image"] for v in plan.to_json()["variants"]] == ["sandbox-replay:sdk-old", None]


@pytest.mark.parametrize(
    "image", ["Sandbox:Upper", "--rm", "a b", "x:", "x@sha256:zz", "a/../b", "x" * 300]
)
def test_an_image_that_is_not_a_reference_is_invalid_naming_the_field(
    tmp_path: Path, image: str
) -> None:
    path = _with_image(tmp_path, "bad", None)
    path.write_text(path.read_text(encoding="utf-8") + f"image: '{image}'\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_workflow(path)
    assert "image" in str(caught.value)


def test_an_image_reference_with_registry_tag_and_digest_loads(tmp_path: Path) -> None:
    path = _with_image(tmp_path, "ok", f"registry.local:5000/team/agent:1.2@sha256:{'a' * 64}")
    assert load_workflow(path).spec.image.startswith("registry.local:5000/team/agent:1.2@")


def test_the_prefix_trace_keeps_the_prefix_calls_with_their_lines() -> None:
    anchor = load_anchor(REPO / "tests" / "fixtures" / "golden" / "failing.jsonl", 2)
    prefix = anchor.prefix_trace
    assert [c.index for c in prefix.calls] == [0, 1] and prefix.call_lines == (2, 3)
    assert prefix.unanswered() == []  # readable as a trace (was: a zip of unequal lengths)


class _Registry:
    """A registry of tool ids to schema hashes (what `registry_refusals` asks of one)."""

    def __init__(self, hashes: dict[str, str]) -> None:
        self.hashes = hashes

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self.hashes

    def resolve(self, tool_id: str) -> SimpleNamespace:
        return SimpleNamespace(schema_hash=self.hashes[tool_id])


def test_a_variant_whose_registry_cannot_serve_the_prefix_refuses_the_submission() -> None:
    anchor = load_anchor(FAILING, 2)
    recorded = {c.tool: c.schema_hash for c in anchor.trace.calls}
    fine = SimpleNamespace(name="fine", registry=_Registry(dict(recorded)))
    changed = SimpleNamespace(
        name="changed", registry=_Registry({**recorded, "customer.get": "f" * 64})
    )
    missing = SimpleNamespace(
        name="missing", registry=_Registry({"ticket.get": recorded["ticket.get"]})
    )
    check_anchor(SimpleNamespace(anchor=anchor, variants=[fine]))  # type: ignore[arg-type]
    with pytest.raises(ReplayRefused) as caught:
        check_anchor(SimpleNamespace(anchor=anchor, variants=[fine, changed, missing]))  # type: ignore[arg-type]
    message = caught.value.message
    assert "variant changed: recorded tool 'customer.get' changed its schema" in message
    assert "variant missing: recorded tool 'customer.get' (call #1) is missing" in message
    assert "variant fine" not in message
