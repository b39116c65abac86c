"""The first-difference messages show where two texts differ (issue 27: they were cut before)."""

from __future__ import annotations

from runner.providers.apis import ApiCall
from runner.providers.replay_api import mismatch
from runner.reproduce.diff import first_difference
from runner.trace.excerpt import cut, differing_excerpts

LONG = "x" * 400


def test_short_texts_are_shown_whole() -> None:
    assert differing_excerpts("abc", "abd") == ("abc", "abd")


def test_a_difference_past_the_width_is_inside_both_excerpts() -> None:
    a, b = differing_excerpts(LONG + "AAA" + LONG, LONG + "BBB" + LONG, 120)
    assert "AAA" in a and "BBB" in b
    assert a.startswith("...") and a.endswith("...") and b.startswith("...")
    assert len(a) <= 126


def test_a_difference_near_the_start_keeps_the_start() -> None:
    a, b = differing_excerpts("ab" + LONG, "ac" + LONG, 120)
    assert a.startswith("ab") and b.startswith("ac") and a.endswith("...")


def test_one_text_a_prefix_of_the_other() -> None:
    a, b = differing_excerpts(LONG, LONG + " and more", 120)
    assert b.endswith("and more") and a.endswith("x")


def test_a_gateway_request_miss_names_the_differing_part_and_reproduce_keeps_it() -> None:
    recorded = {
        "api": "responses",
        "request": {"input": [{"output": LONG + " stamp=Stamp(query='password', length=8)"}]},
    }
    request = {"input": [{"output": LONG + " stamp=None"}]}
    call = ApiCall(api="responses", path="/v1/responses", request=request, body=request)
    message = mismatch(call, recorded)
    assert message is not None
    assert "stamp=None" in message and "stamp=Stamp(query" in message
    replayed = [
        {
            "index": 2,
            "tool": "model",
            "error": {"class": "E", "message": f"turn 1 differs from its recording: {message}"},
        }
    ]
    found = first_difference([{"index": 2, "tool": "model"}], replayed, [])
    assert found is not None
    assert "stamp=Stamp(query" in found["summary"]  # the recorded side is not cut away


def test_one_side_alone_is_cut_at_its_width_with_the_mark_counted() -> None:
    assert cut("short") == "short"
    assert cut("x" * 120) == "x" * 120
    assert cut("x" * 121) == "x" * 117 + "..."
    assert len(cut("y" * 500, 40)) == 40
