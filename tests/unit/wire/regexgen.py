"""Generated patterns and texts compared with ``re.search`` (standard library only, 3.9+).

Used by tests/unit/runtime/test_linearre.py, here and in a Python 3.9 subprocess.
"""

import random
import re

from runner.wire import linearre

_ATOMS = ["a", "b", "A", "K", "é", "_", " ", "\\n", ".", "[ab]", "[^a]", "[a-c]", "\\w", "\\W"]
_ATOMS += ["\\d", "\\s", "\\S", "\\b", "\\B", "^", "$", "\\A", "\\Z", "[\\w\\n]", "1"]
_ATOMS += [
    "[^\\W\\d_]",
    "\\x41",
    "\\u00e9",
    "[k-l]",
    "[^\\n]",
    "\\t",
    "\\N{LATIN SMALL LETTER E WITH ACUTE}",
    "\U0001f600",
    "[\U0001f600-\U0001f601]",
]
_QUANTIFIERS = ["", "", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{0,2}", "{1,3}", "{2,}"]
_FLAGS = ["", "", "", "(?i)", "(?m)", "(?s)", "(?a)", "(?im)", "(?ms)", "(?x)", "(?ai)"]
_GROUPS = ["(", "(?:", "(?i:", "(?-i:", "(?m:", "(?a:", "(?s:"]
_ALPHABET = (
    "abAK\u212aé_ \n1\u0663-\tÉkL\U0001f600\r"  # Kelvin sign (folds to k), an Arabic-Indic digit
)


def _pattern(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.25 and depth < 3:
            inner = _pattern(rng, depth + 1)
            if rng.random() < 0.3:
                inner += "|" + _pattern(rng, depth + 1)
            parts.append(rng.choice(_GROUPS) + inner + ")" + rng.choice(_QUANTIFIERS))
        else:
            parts.append(rng.choice(_ATOMS) + rng.choice(_QUANTIFIERS))
    text = "".join(parts)
    if depth == 0 and rng.random() < 0.2:
        text += "|" + _pattern(rng, 1)
    return text


def differences(seed: int, patterns: int) -> tuple[int, list[tuple[str, str, bool]]]:
    """(cases compared, the cases where the engine and ``re.search`` disagree)."""
    rng = random.Random(seed)
    compared, wrong = 0, []
    for _ in range(patterns):
        pattern = rng.choice(_FLAGS) + _pattern(rng)
        try:
            expected = re.compile(pattern)
        except re.error:
            continue
        engine = linearre.Pattern(pattern)
        for _ in range(5):
            text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 8)))
            compared += 1
            answer = engine.search(text)
            if answer != (expected.search(text) is not None):
                wrong.append((pattern, text, answer))
    return compared, wrong
