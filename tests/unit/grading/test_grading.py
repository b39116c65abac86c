"""Tournament grading: rubric, module:function and model judges, openskill aggregation."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runner.grading
from runner.errors import CeilingReached, GradingError, InputError
from runner.grading import (
    Group,
    ModelJudge,
    Result,
    ToolCall,
    grade,
    make_judge,
    rubric_judge,
)
from runner.grading.rubric import json_subset, matched_in_order, score
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger

PRICES = {"judge-model*": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0}}
EXPECTED = {
    "output": "refund issued",
    "tool_calls": [
        {"tool": "ticket.get", "args": {"ticket_id": "T1"}},
        {"tool": "refund.issue", "args": {"amount": 10}},
    ],
}
GOOD_CALLS = (
    ToolCall("ticket.get", {"ticket_id": "T1", "verbose": True}),
    ToolCall("kb.search", {"q": "refund"}),
    ToolCall("refund.issue", {"amount": 10.0, "currency": "EUR"}),
)


def _good(variant: str) -> Result:
    return Result(variant, "succeeded", "refund issued", GOOD_CALLS)


def _bad(variant: str) -> Result:
    return Result(variant, "succeeded", "no refund", (ToolCall("ticket.get", {"ticket_id": "T2"}),))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger.for_state_dir(tmp_path / "state")
    led.create_job("job", {}, {})
    yield led
    led.close()


def test_public_surface_is_pinned() -> None:
    assert sorted(runner.grading.__all__) == sorted(
        [
            "JUDGES",
            "FunctionJudge",
            "Group",
            "Judge",
            "JudgeSpec",
            "ModelJudge",
            "Provider",
            "Ranking",
            "Result",
            "Standing",
            "ToolCall",
            "TournamentReport",
            "aggregate",
            "grade",
            "make_judge",
            "parse_judge",
            "rubric_judge",
        ]
    )


# -- rubric ---------------------------------------------------------------------------------


def test_variant_matching_expected_rates_higher() -> None:
    groups = [Group(f"t{i}", (_bad("A"), _good("B")), EXPECTED) for i in range(4)]
    report = grade(groups, make_judge("rubric"), variants=["A", "B"])
    a, b = report.standing("A"), report.standing("B")
    assert [s.variant for s in report.standings] == ["B", "A"]
    assert b.mu > a.mu and b.ordinal > a.ordinal
    assert (a.mean_rank, b.mean_rank) == (2.0, 1.0)
    assert b.versus["A"] == {"wins": 4, "ties": 0, "losses": 0}
    assert a.versus["B"] == {"wins": 0, "ties": 0, "losses": 4}
    assert [r.ranks for r in report.tasks] == [{"A": 2, "B": 1}] * 4
    assert report.tasks[0].scores == {"A": 0.0, "B": 1.0}
    assert report.judge == "rubric" and report.ungraded == ()
    json.dumps(report.to_dict())  # the report data is JSON-ready


def test_equal_episodes_tie() -> None:
    groups = [Group(f"t{i}", (_good("A"), _good("B"), _bad("C")), EXPECTED) for i in range(3)]
    report = grade(groups, rubric_judge, variants=["A", "B", "C"])
    a, b, c = (report.standing(v) for v in "ABC")
    assert a.mu == pytest.approx(b.mu) and a.sigma == pytest.approx(b.sigma)
    assert a.versus["B"] == {"wins": 0, "ties": 3, "losses": 0}
    assert report.tasks[0].ranks == {"A": 1, "B": 1, "C": 3}
    assert c.ordinal < a.ordinal
    assert [s.variant for s in report.standings][:2] == ["A", "B"]  # a tie sorts by name


def test_rubric_criteria() -> None:
    ok = Result("A", "succeeded", {"answer": "the refund was issued", "n": 1}, GOOD_CALLS)
    assert score(ok, {"output_contains": "refund was"}) == 1.0
    assert score(ok, {"output_contains": ["refund", "missing"]}) == 0.5
    assert score(ok, {"output": {"n": 1.0, "answer": "the refund was issued"}}) == 1.0
    assert score(ok, {"output": {"n": True, "answer": "the refund was issued"}}) == 0.0
    # Order matters; extra calls in between are allowed; args are a JSON subset.
    assert score(ok, {"tool_calls": [{"tool": "refund.issue"}, {"tool": "ticket.get"}]}) == 0.5
    assert score(ok, {"tool_calls": [{"tool": "ticket.get"}, {"tool": "refund.issue"}]}) == 1.0
    assert score(ok, {"tool_calls": [{"tool": "ticket.get", "args": {"ticket_id": "X"}}]}) == 0.0
    # A failed episode scores 0 whatever it produced; no expected block: success is enough.
    assert score(Result("A", "failed", ok.output, GOOD_CALLS), {"output": ok.output}) == 0.0
    assert score(Result("A", "succeeded"), None) == 1.0
    assert score(Result("A", "timeout"), None) == 0.0


def test_json_subset_and_in_order_matching() -> None:
    assert json_subset({"a": {"b": [1, {"c": 2}]}}, {"a": {"b": [1, {"c": 2, "d": 3}]}, "e": 0})
    assert not json_subset({"a": [1]}, {"a": [1, 2]})
    assert not json_subset({"a": 1}, {"a": "1"})
    assert not json_subset({"a": None}, {})
    calls = [ToolCall("x"), ToolCall("y"), ToolCall("x")]
    assert matched_in_order([{"tool": "y"}, {"tool": "x"}], calls) == 2
    assert matched_in_order([{"tool": "x"}, {"tool": "x"}, {"tool": "x"}], calls) == 2


def test_malformed_expected_is_an_input_error() -> None:
    group = Group("t1", (_good("A"), _good("B")), {"outputs": "typo"})
    with pytest.raises(InputError, match=r"expected: task 't1': unknown key\(s\) \['outputs'\]"):
        rubric_judge(group)
    with pytest.raises(InputError, match=r"expected\.tool_calls"):
        rubric_judge(Group("t1", (_good("A"),), {"tool_calls": [{"args": {}}]}))


def test_result_from_trace() -> None:
    records = [
        {"v": 1, "type": "run", "run_id": "r"},
        {"v": 1, "type": "call", "index": 0, "tool": "ticket.get", "args": {"ticket_id": "T1"}},
        {"v": 1, "type": "call", "index": 1, "tool": "model", "request": {}},
        {"v": 1, "type": "end", "status": "succeeded", "output": "ok"},
    ]
    result = Result.from_trace("A", records)
    assert result == Result("A", "succeeded", "ok", (ToolCall("ticket.get", {"ticket_id": "T1"}),))
    with pytest.raises(GradingError, match="no end line"):
        Result.from_trace("A", records[:-1])


# -- module:function ------------------------------------------------------------------------


def test_function_judge_receives_the_whole_group(tmp_path: Path) -> None:
    (tmp_path / "my_judges.py").write_text(
        textwrap.dedent(
            """
            SEEN = []
            def by_length(group):
                SEEN.append(group)
                return {"scores": {r["variant"]: len(r["output"]) for r in group["results"]}}
            def ranks_list(group):
                return {"ranks": [3, 1, 3]}
            def broken(group):
                return [1, 2]
            def partial(group):
                return {"ranks": {"A": 1}}
            def boom(group):
                raise RuntimeError("nope")
            """
        )
    )
    group = Group(
        "t1",
        (
            Result("A", "succeeded", "xx"),
            Result("B", "succeeded", "xxxx"),
            Result("C", "failed", "xx"),
        ),
        None,
        {"q": 1},
    )
    judge = make_judge("my_judges:by_length", search_paths=[tmp_path])
    ranking = judge(group)
    assert ranking.ranks == {"B": 1, "A": 2, "C": 2}
    assert ranking.judge == "my_judges:by_length"
    import my_judges  # type: ignore[import-not-found]

    assert my_judges.SEEN[0]["input"] == {"q": 1}
    assert [r["variant"] for r in my_judges.SEEN[0]["results"]] == ["A", "B", "C"]
    assert make_judge("my_judges:ranks_list", search_paths=[tmp_path])(group).ranks == {
        "A": 2,
        "B": 1,
        "C": 2,
    }
    for name, pattern in [("broken", "must return"), ("partial", "missing"), ("boom", "raised")]:
        with pytest.raises(GradingError, match=pattern):
            make_judge(f"my_judges:{name}", search_paths=[tmp_path])(group)
    with pytest.raises(InputError, match="cannot import"):
        make_judge("no_such_module_xyz:f")
    with pytest.raises(InputError, match="no callable"):
        make_judge("my_judges:SEEN", search_paths=[tmp_path])
    with pytest.raises(InputError, match="unknown judge"):
        make_judge("lottery")


def test_a_judge_error_leaves_one_group_ungraded_and_grades_the_rest(tmp_path: Path) -> None:
    def flaky(group: Group) -> Any:
        if group.task_id == "t2":
            raise GradingError("cannot decide")
        return rubric_judge(group)

    groups = [Group(t, (_bad("A"), _good("B")), EXPECTED) for t in ("t1", "t2", "t3")]
    groups.append(Group("t4", (_good("B"),), EXPECTED))
    report = grade(groups, flaky, variants=["A", "B"], judge_name="flaky")
    assert [r.task_id for r in report.tasks] == ["t1", "t3"]
    assert [(u["task_id"], u["reason"]) for u in report.ungraded] == [
        ("t2", "judge_error"),
        ("t4", "fewer_than_two_results"),
    ]
    assert report.standing("B").tasks_graded == 2
    assert report.standing("B").episodes_by_status == {"succeeded": 4}


# -- model:NAME -----------------------------------------------------------------------------


class FakeProvider:
    """Answers like an OpenAI-compatible endpoint; ranks by the output text it is shown."""

    def __init__(self, answer: Any = None, usage: dict[str, int] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer = answer
        self.usage = usage if usage is not None else {"prompt_tokens": 300, "completion_tokens": 20}

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        if self.answer is None:
            shown = json.loads(request["messages"][1]["content"])["candidates"]
            ranks = {
                label: 1 if c["output"] == "refund issued" else 2 for label, c in shown.items()
            }
            content = json.dumps({"ranks": ranks})
        else:
            content = self.answer
        return {
            "id": "chatcmpl-1",
            "model": "judge-model-2025-01-01",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            "usage": self.usage,
        }


def test_model_judge_ranks_and_is_charged_to_judge(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {"judge": Ceiling(usd=1.0), "replay": Ceiling(runs=1)})
    provider = FakeProvider()
    judge = make_judge("model:judge-model", provider=provider, guard=guard, prices=PRICES)
    groups = [Group(f"t{i}", (_bad("variant-A"), _good("variant-B")), EXPECTED) for i in range(2)]
    report = grade(groups, judge, variants=["variant-A", "variant-B"])

    assert report.judge == "model:judge-model"
    assert report.standing("variant-B").mu > report.standing("variant-A").mu
    # asked twice per group, in two orders of the candidates (runner.grading.order)
    assert [a["model"] for a in report.tasks[0].detail["answers"]] == ["judge-model-2025-01-01"] * 2
    assert report.tasks[0].detail["agree"] is True
    assert report.consistency == {"checked": 2, "agreed": 2, "disagreed": []}
    request = provider.requests[0]
    assert request["model"] == "judge-model" and request["max_tokens"] == 512
    assert "variant-A" not in json.dumps(request)  # candidates are anonymised
    totals = ledger.totals("job")
    per_call_usd = (300 * 1.0 + 20 * 2.0) / 1e6
    charged = totals["judge"].charged
    assert (charged.runs, charged.tokens_in, charged.tokens_out) == (4, 1200, 80)
    assert charged.usd == pytest.approx(4 * per_call_usd)
    assert totals["judge"].model_calls == 4 and totals["judge"].reserved == Amount()
    assert totals["replay"].committed == Amount()
    charge = ledger.charges("job")[0]
    assert (charge.purpose, charge.kind, charge.model) == (
        "judge",
        "model_call",
        "judge-model-2025-01-01",
    )


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"ranks": {"1": 1, "2": 2}}\n```',  # fenced: not strictly JSON
        '{"ranks": {"1": 1}}',  # a candidate missing
        '{"ranks": {"1": 1, "2": 2, "3": 3}}',  # an unknown candidate
        '{"ranks": {"1": 0, "2": 1}}',  # rank below 1
        '{"ranks": {"1": 1.5, "2": 1}}',  # not an integer
        '{"ranks": {"1": 1, "2": 2}, "why": "because"}',  # extra key
        '["1", "2"]',
    ],
)
def test_malformed_model_answer_is_a_grading_error_but_still_charged(
    ledger: Ledger, answer: str
) -> None:
    guard = CeilingGuard(ledger, "job", {"judge": Ceiling(usd=1.0)})
    judge = ModelJudge("judge-model", FakeProvider(answer), guard, PRICES)
    with pytest.raises(GradingError, match="judge model:judge-model on task 't1'"):
        judge(Group("t1", (_bad("A"), _good("B")), EXPECTED))
    assert ledger.totals("job")["judge"].charged.tokens == 320


def test_response_without_usage_is_charged_at_its_estimate(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {})
    judge = ModelJudge("judge-model", FakeProvider(usage={}), guard, PRICES)
    judge_no_usage = ModelJudge(
        "judge-model", lambda r: {"model": "m", "choices": []}, guard, PRICES
    )
    with pytest.raises(GradingError, match="no usage"):
        judge_no_usage(Group("t1", (_bad("A"), _good("B")), EXPECTED))
    charged = ledger.totals("job")["judge"].charged
    assert charged.runs == 1 and charged.tokens_out == 512 and charged.tokens_in > 100
    # An empty usage object counts as zero tokens (the endpoint said so).
    judge(Group("t2", (_bad("A"), _good("B")), EXPECTED))


def test_provider_failure_releases_the_reservation(ledger: Ledger) -> None:
    def down(request: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("refused")

    guard = CeilingGuard(ledger, "job", {"judge": Ceiling(runs=1)})
    with pytest.raises(GradingError, match="provider failed"):
        ModelJudge("judge-model", down, guard, PRICES)(Group("t1", (_bad("A"), _good("B"))))
    assert ledger.totals("job")["judge"].committed == Amount()


def test_judge_ceiling_stops_grading_without_calling_and_leaves_replay_alone(
    ledger: Ledger,
) -> None:
    # a model judge asks twice per group (two orders): room for one group
    guard = CeilingGuard(ledger, "job", {"judge": Ceiling(runs=2), "replay": Ceiling(runs=10)})
    guard.settle(guard.reserve("replay", Amount(runs=3)), Amount(runs=3))
    provider = FakeProvider()
    judge = ModelJudge("judge-model", provider, guard, PRICES)
    groups = [Group(f"t{i}", (_bad("A"), _good("B")), EXPECTED) for i in range(3)]
    report = grade(groups, judge, variants=["A", "B"])
    assert len(provider.requests) == 2
    assert [r.task_id for r in report.tasks] == ["t0"]
    assert [(u["task_id"], u["reason"]) for u in report.ungraded] == [
        ("t1", "ceiling_reached"),
        ("t2", "ceiling_reached"),
    ]
    assert report.ceiling_reached is not None
    assert (report.ceiling_reached["purpose"], report.ceiling_reached["limit"]) == ("judge", "runs")
    assert ledger.totals("job")["replay"].charged == Amount(runs=3)
    with pytest.raises(CeilingReached):
        judge(groups[0])


def test_model_judge_needs_a_priced_model_and_its_wiring(ledger: Ledger) -> None:
    guard = CeilingGuard(ledger, "job", {})
    with pytest.raises(InputError, match="no price for model 'unpriced'"):
        make_judge("model:unpriced", provider=FakeProvider(), guard=guard, prices=PRICES)
    with pytest.raises(InputError, match="need a model provider"):
        make_judge("model:judge-model")


def test_provider_error_answers_release_and_raw_bodies_are_accepted(ledger: Ledger) -> None:
    from dataclasses import dataclass

    @dataclass
    class Response:  # the shape of runner.providers.base.ProviderResponse
        body: str | None
        error: dict[str, str] | None = None

    guard = CeilingGuard(ledger, "job", {"judge": Ceiling(runs=10)})
    group = Group("t1", (_bad("A"), _good("B")), EXPECTED)
    failing = [
        lambda r: {"error": {"message": "rate limited", "type": "rate_limit"}},
        lambda r: json.dumps({"error": {"message": "overloaded"}}),
        lambda r: Response(None, {"class": "httpx.ConnectError", "message": "refused"}),
    ]
    for provider in failing:
        with pytest.raises(GradingError, match="provider failed"):
            ModelJudge("judge-model", provider, guard, PRICES)(group)
    assert ledger.totals("job")["judge"].committed == Amount()

    fake = FakeProvider()
    as_body = ModelJudge("judge-model", lambda r: json.dumps(fake(r)), guard, PRICES)
    as_object = ModelJudge("judge-model", lambda r: Response(json.dumps(fake(r))), guard, PRICES)
    assert as_body(group).ranks == as_object(group).ranks == {"A": 2, "B": 1}
    assert ledger.totals("job")["judge"].charged.runs == 2
    with pytest.raises(GradingError, match="not JSON"):
        ModelJudge("judge-model", lambda r: "<html>", guard, PRICES)(group)
    assert ledger.totals("job")["judge"].charged.runs == 3  # sent, unknown cost: the estimate


def test_an_unpriced_answering_model_is_priced_as_the_one_asked(ledger: Ledger) -> None:
    def provider(request: dict[str, Any]) -> dict[str, Any]:
        return {**FakeProvider()(request), "model": "some-alias"}

    guard = CeilingGuard(ledger, "job", {})
    ModelJudge("judge-model", provider, guard, PRICES)(Group("t1", (_bad("A"), _good("B"))))
    charge = ledger.charges("job")[0]
    assert charge.model == "some-alias"
    assert charge.actual is not None
    assert charge.actual.usd == pytest.approx((300 * 1.0 + 20 * 2.0) / 1e6)
