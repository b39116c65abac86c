r"""An argument rule's regular expression searched in time linear in the text, whatever it is.

Standard library only, Python 3.9+: the argument rules (`runner.wire.argrules`) decide with
this both in the sandbox and on the host (``policy diff``, ``check``), so a call is decided one
way wherever it is decided. Python's ``re`` backtracks: ``(.*a){16}$`` over 31 characters ran
for 76 s in ``policy diff`` and held a sandbox to its timeout. Here the pattern is
parsed by the standard library's own parser (``re._parser``; ``sre_parse`` before 3.11), so the
syntax and every character class, case fold and flag are Python's, and then *run* as an
automaton (Thompson's construction, simulated as a lazily built DFA, as RE2 does): each text
character is read once, and what a step costs does not depend on how the pattern could
backtrack.

What it decides: whether ``re.search(pattern, text)`` would find a match (a search's answer,
not the match itself). Exactly Python's answer for every pattern it accepts
(`tests/unit/runtime/test_linearre.py` compares the two on generated patterns and texts).

Refused when compiled (`Unsupported`, which the policy loader reports naming the field):
back-references, look-ahead and look-behind, conditional groups, atomic groups and possessive
quantifiers (no automaton decides them: the same list RE2 refuses), groups nested more than
`MAX_DEPTH` deep, and a pattern whose counted repeats expand past `MAX_PROGRAM` instructions
(``(a{1000}){1000}``).

Bounded when searched: a search builds at most `MAX_STEPS` units of automaton (each unit a
pattern position visited while building a new state, or a character class computed); a search
that needs more raises `BudgetExceeded` and the rule denies the call, as it does a value too
long to read (fail closed). The count is deterministic: every search starts from nothing, so
the sandbox and the host decide the same text the same way. Measured cost: ``bench`` has none;
the unit tests time the issue's patterns over 65,536 hostile characters.
"""

import re
from typing import Any, Dict, FrozenSet, List, Sequence, Set, Tuple

try:  # Python 3.11+: the parser's home; sre_parse is its deprecated alias there
    import re._compiler as _compiler  # type: ignore[import-not-found]
    import re._constants as _c  # type: ignore[import-not-found]
    import re._parser as _parser  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.9/3.10 (the sandbox image's may be)
    import sre_compile as _compiler
    import sre_constants as _c
    import sre_parse as _parser

__all__ = ["MAX_DEPTH", "MAX_PROGRAM", "MAX_STEPS", "BudgetExceeded", "Pattern", "Unsupported"]

MAX_DEPTH = 100  # nested groups (the strict JSON decoder's depth; 500 crashed the parser)
MAX_PROGRAM = 20000  # instructions after counted repeats are expanded
MAX_STEPS = 2000000  # units of automaton one search may build (about a second of CPU)
MAX_CACHED = 100000  # instructions held in a search's states before they are dropped (~10 MB)

# instructions
_CHAR, _SPLIT, _JMP, _ASSERT, _MATCH = range(5)
# assertions (what ``^ $ \A \Z \b \B`` mean under the flags in force)
_BOS, _BOL, _EOS, _EOL, _EOL_LAST, _WORD_U, _NOT_WORD_U, _WORD_A, _NOT_WORD_A = range(9)
_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_TYPE_FLAGS = re.ASCII | re.LOCALE | re.UNICODE
_MAXREPEAT = _c.MAXREPEAT
_REFUSED = {
    "GROUPREF": "a back-reference",
    "GROUPREF_EXISTS": "a conditional group",
    "ASSERT": "a look-ahead or look-behind",
    "ASSERT_NOT": "a negative look-ahead or look-behind",
    "ATOMIC_GROUP": "an atomic group",
    "POSSESSIVE_REPEAT": "a possessive quantifier",
}


class Unsupported(ValueError):
    """The pattern uses what no linear-time search decides, or is too large (see the module)."""


class BudgetExceeded(Exception):
    """A search needed more than `MAX_STEPS` units of automaton: undecided."""


def nesting_depth(pattern: str) -> int:
    """How deep ``pattern``'s groups nest, read from its text (before the recursive parser).

    Escapes and character classes are skipped; a ``(`` inside a verbose-mode comment counts
    (an over-count only refuses sooner).
    """
    depth = deepest = 0
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index += 1
            if index < size and pattern[index] == "^":
                index += 1
            if index < size and pattern[index] == "]":
                index += 1  # a leading ] is a literal
            while index < size and pattern[index] != "]":
                index += 2 if pattern[index] == "\\" else 1
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth = max(depth - 1, 0)
        index += 1
    return deepest


def _combine(flags: int, add: int, remove: int) -> int:
    """The flags inside ``(?add-remove:...)`` (the standard library's own rule)."""
    if add & _TYPE_FLAGS:
        flags &= ~_TYPE_FLAGS
    return (flags | add) & ~remove


class Pattern:
    """A compiled pattern: `search` answers as ``re.search`` would, in linear time.

    Args:
        pattern: the regular expression (Python syntax).

    Raises:
        re.error: not a regular expression (the standard library's own message).
        Unsupported: what the module docstring lists.
    """

    def __init__(self, pattern: str) -> None:
        if nesting_depth(pattern) > MAX_DEPTH:
            raise Unsupported("groups nested more than {} deep".format(MAX_DEPTH))
        try:
            tree = _parser.parse(pattern)
        except RecursionError:  # pragma: no cover - the depth check comes first
            raise Unsupported("groups nested too deep to parse") from None
        self.pattern = pattern
        self._ops: List[int] = []
        self._args: List[int] = []
        self._alts: List[int] = []  # the second target of a split
        self._atoms: List[Any] = []  # compiled one-character patterns (Python's semantics)
        self._atom_index: Dict[Tuple[int, str], int] = {}
        self._emit(list(tree), tree.state.flags, 0)
        self._add(_MATCH, 0)

    # --- compiling -------------------------------------------------------------------------

    def _add(self, op: int, arg: int, alt: int = -1) -> int:
        if len(self._ops) >= MAX_PROGRAM:
            raise Unsupported(
                "counted repeats expand past {} instructions (e.g. (a{{1000}}){{1000}})".format(
                    MAX_PROGRAM
                )
            )
        self._ops.append(op)
        self._args.append(arg)
        self._alts.append(alt)
        return len(self._ops) - 1

    def _atom(self, op: Any, av: Any, flags: int) -> int:
        """The index of a one-character predicate, compiled by ``re`` itself under ``flags``."""
        key = (flags, repr((op, av)))
        found = self._atom_index.get(key)
        if found is not None:
            return found
        state = _parser.State()
        state.flags = flags
        compiled = _compiler.compile(_parser.SubPattern(state, [(op, av)]), 0)
        self._atoms.append(compiled)
        self._atom_index[key] = len(self._atoms) - 1
        return len(self._atoms) - 1

    def _emit(self, items: Sequence[Tuple[Any, Any]], flags: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise Unsupported("groups nested more than {} deep".format(MAX_DEPTH))
        for op, av in items:
            name = getattr(op, "name", str(op))
            if name in _REFUSED:
                raise Unsupported(
                    "{} (no linear-time search decides it; RE2 refuses it too)".format(
                        _REFUSED[name]
                    )
                )
            if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
                self._add(_CHAR, self._atom(op, av, flags))
            elif op is _c.AT:
                self._add(_ASSERT, self._anchor(av, flags))
            elif op is _c.SUBPATTERN:
                _group, add, remove, body = av
                self._emit(list(body), _combine(flags, add, remove), depth + 1)
            elif op is _c.BRANCH:
                self._branch(av[1], flags, depth)
            elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT):  # greedy or lazy: the same answer
                low, high, body = av
                self._repeat(list(body), low, high, flags, depth)
            else:
                raise Unsupported("{} is not supported".format(name.lower()))

    def _anchor(self, at: Any, flags: int) -> int:
        multiline = bool(flags & re.MULTILINE)
        ascii_only = bool(flags & re.ASCII)
        if at is _c.AT_BEGINNING:
            return _BOL if multiline else _BOS
        if at is _c.AT_BEGINNING_STRING:
            return _BOS
        if at is _c.AT_END:
            return _EOL if multiline else _EOL_LAST
        if at is _c.AT_END_STRING:
            return _EOS
        if at is _c.AT_BOUNDARY:
            return _WORD_A if ascii_only else _WORD_U
        if at is _c.AT_NON_BOUNDARY:
            return _NOT_WORD_A if ascii_only else _NOT_WORD_U
        raise Unsupported("the anchor {} is not supported".format(getattr(at, "name", at)))

    def _branch(self, branches: Sequence[Any], flags: int, depth: int) -> None:
        ends: List[int] = []
        for index, branch in enumerate(branches):
            split = -1
            if index < len(branches) - 1:
                split = self._add(_SPLIT, 0)
            self._emit(list(branch), flags, depth + 1)
            if split >= 0:
                ends.append(self._add(_JMP, 0))
                self._args[split] = split + 1
                self._alts[split] = len(self._ops)
        for jump in ends:
            self._args[jump] = len(self._ops)

    def _repeat(
        self, body: List[Tuple[Any, Any]], low: int, high: int, flags: int, depth: int
    ) -> None:
        for _ in range(low):
            self._emit(body, flags, depth + 1)
        if high == _MAXREPEAT:  # L: split body, out; body; jmp L
            loop = self._add(_SPLIT, 0)
            self._emit(body, flags, depth + 1)
            self._add(_JMP, loop)
            self._args[loop] = loop + 1
            self._alts[loop] = len(self._ops)
            return
        splits = []
        for _ in range(high - low):  # each optional copy may be skipped to the end
            splits.append(self._add(_SPLIT, 0))
            self._emit(body, flags, depth + 1)
        for split in splits:
            self._args[split] = split + 1
            self._alts[split] = len(self._ops)

    # --- searching -------------------------------------------------------------------------

    def search(self, text: str) -> bool:
        """Whether ``re.search(self.pattern, text)`` would find a match.

        Raises:
            BudgetExceeded: the search needed more than `MAX_STEPS` units (undecided).
        """
        return _Search(self, text).run()


class _Search:
    """One search: its own caches, so that its cost depends on (pattern, text) alone."""

    def __init__(self, pattern: Pattern, text: str) -> None:
        self.p = pattern
        self.text = text
        self.steps = 0
        self.classes: List[Tuple[Tuple[bool, ...], bool, bool, bool]] = []
        self.class_of: Dict[str, int] = {}
        self.class_index: Dict[Tuple[Tuple[bool, ...], bool, bool, bool], int] = {}
        self.states: Dict[FrozenSet[int], int] = {}
        self.state_keys: List[FrozenSet[int]] = []
        self.state_chars: List[Tuple[int, ...]] = []
        self.state_match: List[bool] = []
        self.moves: Dict[Tuple[int, int, int, bool], int] = {}
        self.cached = 0

    def _flush(self, keep: int) -> int:
        """Drop every state but ``keep`` (RE2's answer to a full cache); its new number."""
        key = self.state_keys[keep]
        self.states.clear()
        self.state_keys.clear()
        self.state_chars.clear()
        self.state_match.clear()
        self.moves.clear()
        self.cached = 0
        return self._intern(key)

    def _intern(self, key: FrozenSet[int]) -> int:
        found = self.states.get(key)
        if found is None:
            ops = self.p._ops
            found = len(self.state_chars)
            self.states[key] = found
            self.state_keys.append(key)
            self.state_chars.append(tuple(pc for pc in key if ops[pc] == _CHAR))
            self.state_match.append(any(ops[pc] == _MATCH for pc in key))
            self.cached += len(key) + 1
        return found

    def _spend(self, units: int) -> None:
        self.steps += units
        if self.steps > MAX_STEPS:
            raise BudgetExceeded(
                "the search needed more than {} steps of automaton".format(MAX_STEPS)
            )

    def _class(self, char: str) -> int:
        """The class of ``char``: its answer to every predicate and what anchors read of it."""
        found = self.class_of.get(char)
        if found is not None:
            return found
        atoms = self.p._atoms
        self._spend(len(atoms) + 1)
        key = (
            tuple(atom.match(char) is not None for atom in atoms),
            char == "\n",
            char.isalnum() or char == "_",  # sre's Unicode word character
            char in _ASCII_WORD,
        )
        index = self.class_index.get(key)
        if index is None:
            index = len(self.classes)
            self.classes.append(key)
            self.class_index[key] = index
        self.class_of[char] = index
        return index

    def _holds(self, anchor: int, prev: int, cur: int, last: bool) -> bool:
        """Whether ``anchor`` holds between characters of class ``prev`` and ``cur``.

        -1 stands for the text's start (``prev``) or end (``cur``); ``last``: ``cur`` is the
        text's last character.
        """
        if anchor == _BOS:
            return prev < 0
        if anchor == _BOL:
            return prev < 0 or self.classes[prev][1]
        if anchor == _EOS:
            return cur < 0
        if anchor == _EOL:
            return cur < 0 or self.classes[cur][1]
        if anchor == _EOL_LAST:
            return cur < 0 or (last and self.classes[cur][1])
        if prev < 0 and cur < 0:
            return False  # sre: neither \b nor \B holds in an empty text
        column = 2 if anchor in (_WORD_U, _NOT_WORD_U) else 3
        before = prev >= 0 and self.classes[prev][column]
        after = cur >= 0 and self.classes[cur][column]
        return (before != after) == (anchor in (_WORD_U, _WORD_A))

    def _state(self, seeds: Set[int], prev: int, cur: int, last: bool) -> int:
        """The state of every instruction reachable from ``seeds`` without reading."""
        ops, args, alts = self.p._ops, self.p._args, self.p._alts
        seen: Set[int] = set()
        stack = list(seeds)
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            op = ops[pc]
            if op == _SPLIT:
                stack.append(args[pc])
                stack.append(alts[pc])
            elif op == _JMP:
                stack.append(args[pc])
            elif op == _ASSERT and self._holds(args[pc], prev, cur, last):
                stack.append(pc + 1)
        self._spend(len(seen) + 1)
        return self._intern(frozenset(pc for pc in seen if ops[pc] in (_CHAR, _MATCH)))

    def run(self) -> bool:
        text, size = self.text, len(self.text)
        cur = self._class(text[0]) if size > 0 else -1
        state = self._state({0}, -1, cur, size == 1)
        args = self.p._args
        for index in range(size):
            if self.state_match[state]:
                return True
            after = self._class(text[index + 1]) if index + 1 < size else -1
            last = index + 2 == size
            key = (state, cur, after, last)
            following = self.moves.get(key)
            if following is None:
                if self.cached > MAX_CACHED:
                    state = self._flush(state)
                row = self.classes[cur][0]
                seeds = {pc + 1 for pc in self.state_chars[state] if row[args[pc]]}
                seeds.add(0)  # a search: a match may begin at every position
                following = self._state(seeds, cur, after, last)
                self.moves[(state, cur, after, last)] = following
            state, cur = following, after
        return self.state_match[state]
