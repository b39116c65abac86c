"""What a ``matches`` rule costs now that it is searched by an automaton.

``.venv/bin/python bench/bench_regex.py``: for each pattern and text, the CPU time of one
decision by `runner.wire.linearre` (what the guard and ``policy diff`` run) and, as the
baseline measured in the same run, by Python's ``re.search`` (what they ran before), with their
ratio. The backtracking baseline is not run where it takes minutes (the issue's patterns over
their 31-character argument): those rows say ``skipped`` and show the automaton alone. Compare
ratios, not absolute figures (the machine is shared).
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runner.wire import linearre

_RNG = random.Random(32)
COMMAND = "cd /srv/app && git status --short && rm -rf build/ && make -j4 test  # nightly"
CASES: list[tuple[str, str, str, bool]] = [  # (pattern, text name, text, run re too)
    (r"^\s*rm\s+-[a-zA-Z]*r", "command", COMMAND, True),
    (r"\brm\s+-[a-zA-Z]*[rR]", "command", COMMAND, True),
    (r"^\s*git\s+push\b.*\s(--force|-f)\b", "command", COMMAND, True),
    (r"\brm\s+-[a-zA-Z]*[rR]", "64 KiB text", (COMMAND + "\n") * 800, True),
    (r"[a-z]{1,64}@[a-z]{1,64}\.com", "64 KiB text", (COMMAND + "\n") * 800, True),
    (r"^(\w+\s?){1,16}$", "31 chars", "a" * 30 + "!", False),
    (r"(.*a){16}$", "31 chars", "a" * 30 + "!", False),
    (r"(a|aa){16}$", "31 chars", "a" * 30 + "!", True),
    (r"(.*a){16}$", "64 KiB a", "a" * 65535 + "!", False),
    (r"[ab]*a[ab]{200}c", "64 KiB a/b", "".join(_RNG.choice("ab") for _ in range(65536)), False),
]


def cpu_s(work: Callable[[], object], repeat: int) -> float:
    """Best CPU seconds of ``repeat`` runs of ``work`` (process time: other tenants excluded)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def main() -> int:
    """Print one row per case: automaton, baseline, ratio."""
    print(f"{'pattern':38} {'text':12} {'automaton':>11} {'re.search':>11} {'ratio':>7}")
    for pattern, name, text, baseline in CASES:
        engine = linearre.Pattern(pattern)

        def decide(engine: linearre.Pattern = engine, text: str = text) -> str:
            try:
                return str(engine.search(text))
            except linearre.BudgetExceeded:
                return "budget"

        repeat = 5 if len(text) < 1000 else 2
        ours = cpu_s(decide, repeat)
        compiled = re.compile(pattern)
        theirs = cpu_s(lambda c=compiled, t=text: c.search(t), repeat) if baseline else None
        shown = "skipped" if theirs is None else f"{theirs * 1e3:9.3f}ms"
        ratio = "" if theirs is None or theirs == 0 else f"{ours / theirs:7.3g}x"
        print(f"{pattern[:38]:38} {name:12} {ours * 1e3:9.3f}ms {shown:>11} {ratio:>7} {decide()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
