"""`runner.wire.linearre`: Python's answer to ``re.search``, in time linear in the text.

The backtracking search of ``(.*a){16}$`` and its kind over 31 characters took
76 s in ``policy diff``. The differential test generates patterns over every construct the
engine accepts (flags, scoped flags, anchors, classes, case folding, counted and lazy repeats)
and compares its answer with ``re.search`` on generated texts, here and on Python 3.9 (the
oldest interpreter a sandbox image may have, where the parser is ``sre_parse``).
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from runner.wire import linearre
from runner.wire.argrules import RuleSet
from tests.support.paths import REPO
from tests.unit.wire.regexgen import differences

PY39 = "/root/.pyenv/versions/3.9.18/bin/python"
HOSTILE = ["a" * 30 + "!", "a" * 65535 + "!", ("ab " * 22000)[:65536]]
ISSUE_PATTERNS = [r"^(\w+\s?){1,16}$", r"(.*a){16}$", r"(a|aa){16}$"]


def test_the_answer_is_re_search_s_on_generated_patterns_and_texts() -> None:
    compared, wrong = differences(seed=32, patterns=2500)
    assert compared > 5000 and wrong == [], wrong[:10]


@pytest.mark.skipif(not Path(PY39).exists(), reason="python3.9 not installed here")
def test_the_answer_is_re_search_s_on_python_39_too() -> None:
    code = (
        f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(Path(__file__).parent)!r}]\n"
        "from regexgen import differences\n"
        "compared, wrong = differences(seed=39, patterns=700)\n"
        "print(compared, len(wrong), wrong[:3])\n"
    )
    done = subprocess.run([PY39, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    compared, wrong = done.stdout.split(" ", 2)[:2]
    assert int(compared) > 1000 and wrong == "0", done.stdout


@pytest.mark.parametrize("pattern", ISSUE_PATTERNS)
@pytest.mark.parametrize("text", HOSTILE, ids=["31", "64k-a", "64k-words"])
def test_the_backtracking_patterns_are_decided_in_a_few_steps_per_character(
    pattern: str, text: str
) -> None:
    search = linearre._Search(linearre.Pattern(pattern), text)
    search.run()
    assert search.steps < 10 * len(text) + 2000, search.steps  # not the budget: linear


def test_answers_on_the_backtracking_patterns() -> None:
    words, email = linearre.Pattern(ISSUE_PATTERNS[0]), linearre.Pattern(ISSUE_PATTERNS[2])
    assert words.search("a b c") and not words.search("a" * 30 + "!")
    assert not words.search(" ".join(["w"] * 17))  # 17 words: more than {1,16}
    assert email.search("a" * 16) and not email.search("b" + "a" * 33 + "b")
    assert not email.search("a" * 15) and not email.search("b" + "a" * 15 + "b")


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", "back-reference"),
        (r"a(?=b)", "look-ahead"),
        (r"(?<!a)b", "look-ahead or look-behind"),
        (r"(a)?(?(1)b|c)", "conditional"),
        (r"(?>a+)b", "atomic group"),
        (r"a*+b", "possessive"),
        ("(" * 101 + ")" * 101, "nested more than 100"),
        ("(" * 500 + "a" + ")" * 500, "nested more than 100"),  # crashed re's own parser
        (r"(a{1000}){1000}", "20000 instructions"),
    ],
)
def test_what_no_automaton_decides_is_refused_named(pattern: str, named: str) -> None:
    if named in ("atomic group", "possessive") and sys.version_info < (3, 11):
        pytest.skip("re has no atomic groups before 3.11")
    with pytest.raises(linearre.Unsupported, match=named):
        linearre.Pattern(pattern)


def test_nesting_depth_skips_escapes_and_classes() -> None:
    assert linearre.nesting_depth(r"\((a)[(((]([)](b))") == 2
    assert linearre.nesting_depth(r"[]((]") == 0 and linearre.nesting_depth(r"[^]((]") == 0


def test_a_search_past_its_budget_denies_the_call_by_that_rule_whatever_its_action() -> None:
    """DFA blow-up (2^200 states): the budget ends the search, deterministically."""
    rng = random.Random(1)
    text = "".join(rng.choice("ab") for _ in range(65536))
    rules = RuleSet.from_json(
        [
            {
                "name": "blowup",
                "tool": "t",
                "action": "allow",
                "when": {"x": {"matches": "[ab]*a[ab]{200}c"}},
            }
        ]
    )
    first, second = rules.decide("t", {"x": text}), rules.decide("t", {"x": text})
    assert not first.allowed and first.rule == "blowup" and first.matched, first.reason
    assert "search steps" in first.reason and first.reason == second.reason
    assert rules.decide("t", {"x": "a" + "b" * 200 + "c"}).allowed  # a short one is decided
