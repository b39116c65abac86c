"""`runner.policy.regexsafety`: exponential patterns are refused at policy load, named."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import InputError
from runner.policy.loader import load_policy
from runner.policy.regexsafety import backtracking_problem

REFUSED = [
    r"^(a+)+$",
    r"(a*)*",
    r"(a|aa)+",
    r"(a|a?)+",
    r"(\w+\s?)*",
    r"(a+){1,100}",
    r"(x+x+)+y",
    r"((ab)*)+",
    r"(?i)(ab|AB)+",
    r"(?:(?=a)a|b)+",
]
ACCEPTED = [
    r"\brm\s+-[a-z]*r",
    r"(foo|bar)+",
    r"(ab|ac)+",
    r"(\d+\.){3}\d+",
    r"^(\s|,)+$",
    r"(\w|_)+",
    r"a*a*b",
]


@pytest.mark.parametrize("pattern", REFUSED)
def test_exponential_patterns_are_refused(pattern: str) -> None:
    assert backtracking_problem(pattern) is not None


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_ordinary_patterns_are_accepted(pattern: str) -> None:
    assert backtracking_problem(pattern) is None


def test_a_policy_with_a_catastrophic_rule_is_an_input_error_naming_the_rule(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\nmode: shadow\nrules:\n  - name: redos\n    tool: shell.run\n"
        "    action: deny\n    when:\n      command: {matches: '^(a|aa)+$'}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"rule 'redos': when\.command\.matches"):
        load_policy(str(path))
