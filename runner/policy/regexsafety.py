r"""Refuse a rule's regular expression that backtracks catastrophically, at policy load.

A ``matches`` condition is searched (``re.search``, a backtracking engine) over recorded and
live arguments: hostile text. ``^(a+)+$`` over 40 ``a`` and a ``!`` takes longer than any run
(attack3: ``policy diff`` hung). The evaluator (`runner.runtime.argrules`) stays standard
library and bounds the text it reads (`runner.runtime.argrules.MAX_VALUE_CHARS`: a longer value
is denied unread); this module refuses the patterns whose search time is exponential in the
text, read from the parse tree of the standard library's own parser (``re._parser``, the
host's Python 3.11+), never from the pattern's text.

Refused, inside a repeat of more than `MAX_PLAIN_REPEAT` iterations (``*``, ``+``, ``{n,}``,
``{0,100}``):

* another such repeat: star height above 1 (``(a+)+``, ``(a*)*``, ``(\w+\s?)*``);
* an alternation two of whose branches can begin with the same character, or one of which can
  match the empty string (``(a|aa)+``, ``(a|a?)+``, ``(?i)(ab|AB)+``): the text splits between
  the branches in exponentially many ways.

First characters are compared over U+0000-U+024F; what the walk cannot read exactly (a
look-around, a back-reference, a branch that may match nothing) counts as overlapping (fail
closed). Polynomial patterns (``a*a*a*b``) are not refused; the text bound keeps them finite.
"""

from __future__ import annotations

# The host runs Python 3.11+ (pyproject), where the parser is ``re._parser`` (``sre_parse``
# is its deprecated alias); typeshed has no stubs for the private modules.
import re
import re._constants as _constants  # type: ignore[import-not-found]
import re._parser as _parser  # type: ignore[import-not-found]
from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_PLAIN_REPEAT", "backtracking_problem"]

MAX_PLAIN_REPEAT = 16
_PROBE = frozenset(range(0x250))
_REPEATS = frozenset(
    getattr(_constants, name)
    for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if hasattr(_constants, name)
)
_CATEGORIES = {
    _constants.CATEGORY_DIGIT: re.compile(r"\d"),
    _constants.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
    _constants.CATEGORY_SPACE: re.compile(r"\s"),
    _constants.CATEGORY_NOT_SPACE: re.compile(r"\S"),
    _constants.CATEGORY_WORD: re.compile(r"\w"),
    _constants.CATEGORY_NOT_WORD: re.compile(r"\W"),
}


def backtracking_problem(pattern: str) -> str | None:
    """Why ``pattern`` would backtrack exponentially, or None when it is accepted.

    Args:
        pattern: a regular expression that ``re.compile`` accepts.

    Returns:
        One line naming the construct (for the policy error), or None.
    """
    tree = _parser.parse(pattern)
    fold = bool(tree.state.flags & re.IGNORECASE)
    return _walk(list(tree), inside=False, fold=fold)


def _walk(items: Iterable[tuple[Any, Any]], *, inside: bool, fold: bool) -> str | None:
    for op, av in items:
        problem: str | None = None
        if op in _REPEATS:
            low, high, body = av
            del low
            repeating = high > MAX_PLAIN_REPEAT
            if repeating and inside:
                return "nested unbounded quantifiers (star height above 1, like (a+)+)"
            problem = _walk(body, inside=inside or repeating, fold=fold)
        elif op == _constants.BRANCH:
            branches = av[1]
            if inside and _overlap(branches, fold):
                problem = (
                    "alternatives under an unbounded quantifier that can match the same text"
                    " (like (a|aa)+)"
                )
            for branch in branches:
                problem = problem or _walk(branch, inside=inside, fold=fold)
        else:
            for sub in _subpatterns(op, av):
                problem = problem or _walk(sub, inside=inside, fold=fold)
        if problem:
            return problem
    return None


def _subpatterns(op: Any, av: Any) -> list[Any]:
    if op == _constants.SUBPATTERN:
        return [av[3]]
    if op in (_constants.ASSERT, _constants.ASSERT_NOT):
        return [av[1]]
    if op == _constants.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    if hasattr(_constants, "ATOMIC_GROUP") and op == _constants.ATOMIC_GROUP:
        return [av]
    return []


def _overlap(branches: list[Any], fold: bool) -> bool:
    seen: set[int] = set()
    for branch in branches:
        first = _first(list(branch), fold)
        if first is None or seen & first:
            return True
        seen |= first
    return False


def _first(items: list[Any], fold: bool) -> frozenset[int] | None:
    """The characters (of the probe range) ``items`` can begin with; None when unknown."""
    if not items:
        return None  # matches the empty string
    op, av = items[0]
    found: frozenset[int] | None
    if op == _constants.LITERAL:
        found = frozenset((av,))
    elif op == _constants.NOT_LITERAL:
        found = _PROBE - {av}
    elif op == _constants.ANY:
        found = _PROBE
    elif op == _constants.IN:
        found = _in(av)
    elif op == _constants.SUBPATTERN:
        found = _first(list(av[3]), fold)
    elif op in _REPEATS:
        found = _first(list(av[2]), fold) if av[0] >= 1 else None
    elif op == _constants.BRANCH:
        found = frozenset()
        for branch in av[1]:
            part = _first(list(branch), fold)
            if part is None:
                return None
            found = found | part
    else:
        found = None  # an anchor, a look-around, a back-reference: not read
    if found is not None and fold:
        found = frozenset(ord(chr(c).lower()[0]) for c in found)
    return found


def _in(items: list[Any]) -> frozenset[int] | None:
    chars: set[int] = set()
    negate = False
    for op, av in items:
        if op == _constants.NEGATE:
            negate = True
        elif op == _constants.LITERAL:
            chars.add(av)
        elif op == _constants.RANGE:
            chars.update(range(av[0], min(av[1], 0x24F) + 1))
        elif op == _constants.CATEGORY and av in _CATEGORIES:
            chars.update(c for c in _PROBE if _CATEGORIES[av].match(chr(c)))
        else:
            return None
    found = frozenset(chars) & _PROBE
    return _PROBE - found if negate else found
