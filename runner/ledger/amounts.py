"""Value types of metering: purposes, an amount of spend, a ceiling, and the ceiling check.

Pure values, no I/O. An `Amount` is what a run or a model call costs (or is estimated to cost)
along the four metered dimensions; a `Ceiling` bounds the sum of amounts of one purpose.
Invariant of `check_fits`: it raises exactly when ``used + estimate`` would exceed any set limit,
so a reservation that passes it keeps the total at or under the ceiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from runner.errors import CeilingReached

Purpose = Literal["live", "replay", "judge"]
PURPOSES: Final[tuple[Purpose, ...]] = ("live", "replay", "judge")

# USD amounts are binary floats; sums of a few thousand of them drift by far less than this.
# A reservation that lands on the ceiling within this slack fits.
USD_EPSILON: Final[float] = 1e-9

# SQLite's INTEGER is a signed 64-bit value (https://www.sqlite.org/datatype3.html): a larger
# ceiling could not be stored in the ledger.
MAX_STORED_INT: Final[int] = 2**63 - 1


def check_purpose(purpose: str) -> Purpose:
    """Return ``purpose`` typed as a `Purpose`.

    Raises:
        ValueError: ``purpose`` is not ``live``, ``replay`` or ``judge``.

    """
    for known in PURPOSES:
        if purpose == known:
            return known
    raise ValueError(f"unknown purpose {purpose!r}; expected one of {', '.join(PURPOSES)}")


@dataclass(frozen=True)
class Amount:
    """Spend along the metered dimensions.

    Attributes:
        runs: sandbox runs started (an episode counts 1, a model call 0).
        tokens_in: model input (prompt) tokens.
        tokens_out: model output (completion) tokens.
        usd: US dollars.
        sandbox_s: sandbox wall-clock seconds.

    """

    runs: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float = 0.0
    sandbox_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("runs", "tokens_in", "tokens_out", "usd", "sandbox_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")

    @property
    def tokens(self) -> int:
        """Input plus output tokens (the dimension a token ceiling bounds)."""
        return self.tokens_in + self.tokens_out

    def __add__(self, other: Amount) -> Amount:
        return Amount(
            runs=self.runs + other.runs,
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            usd=self.usd + other.usd,
            sandbox_s=self.sandbox_s + other.sandbox_s,
        )

    def to_dict(self) -> dict[str, float | int]:
        """Return a JSON-ready dict: runs, tokens_in, tokens_out, usd, sandbox_s."""
        return {
            "runs": self.runs,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "usd": self.usd,
            "sandbox_s": self.sandbox_s,
        }


ZERO: Final[Amount] = Amount()


@dataclass(frozen=True)
class Ceiling:
    """Spend limits of one purpose; ``None`` leaves a dimension unbounded.

    Attributes:
        runs: most sandbox runs.
        tokens: most model tokens, input plus output.
        usd: most US dollars.
        sandbox_s: most sandbox wall-clock seconds.

    """

    runs: int | None = None
    tokens: int | None = None
    usd: float | None = None
    sandbox_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("runs", "tokens", "usd", "sandbox_s"):
            value = getattr(self, name)
            if value is None:
                continue
            integral = name in ("runs", "tokens")
            if isinstance(value, bool) or not isinstance(value, int if integral else (int, float)):
                kind = "an integer" if integral else "a number"
                raise ValueError(f"ceiling {name} must be {kind}, got {value!r}")
            if not math.isfinite(value):  # an infinite (or NaN) ceiling would bound nothing
                raise ValueError(f"ceiling {name} must be finite, got {value}")
            if value < 0:
                raise ValueError(f"ceiling {name} must not be negative, got {value}")
            if integral and value > MAX_STORED_INT:
                raise ValueError(
                    f"ceiling {name} must be at most {MAX_STORED_INT} (the ledger's integers)"
                )

    @classmethod
    def of(cls, limits: Any) -> Ceiling:
        """Copy a ceiling-like object, e.g. the policy's ``Ceiling`` model.

        Args:
            limits: any object with ``runs``, ``tokens``, ``usd`` and ``sandbox_s`` attributes
                (a missing attribute is unbounded). Override single values afterwards with
                `dataclasses.replace` (CLI flags win over the policy).
        """
        return cls(
            runs=getattr(limits, "runs", None),
            tokens=getattr(limits, "tokens", None),
            usd=getattr(limits, "usd", None),
            sandbox_s=getattr(limits, "sandbox_s", None),
        )

    @property
    def unbounded(self) -> bool:
        """True when no dimension is limited."""
        return all(v is None for v in (self.runs, self.tokens, self.usd, self.sandbox_s))

    def to_dict(self) -> dict[str, float | int | None]:
        """Return a JSON-ready dict: runs, tokens, usd, sandbox_s (``None`` = unbounded)."""
        return {
            "runs": self.runs,
            "tokens": self.tokens,
            "usd": self.usd,
            "sandbox_s": self.sandbox_s,
        }


UNBOUNDED: Final[Ceiling] = Ceiling()


def check_fits(purpose: str, ceiling: Ceiling, used: Amount, estimate: Amount) -> None:
    """Raise when reserving ``estimate`` on top of ``used`` would exceed ``ceiling``.

    Args:
        purpose: the purpose being charged, named in the error.
        ceiling: the limits of that purpose.
        used: what is already charged or reserved under the ceiling.
        estimate: what the new reservation asks for.

    Raises:
        CeilingReached: with fields ``purpose``, ``limit`` (``runs``, ``tokens``, ``usd`` or
            ``sandbox_s``; the first one exceeded in that order), ``ceiling``, ``used`` and
            ``requested``.

    """
    checks: tuple[tuple[str, float | None, float, float], ...] = (
        ("runs", ceiling.runs, used.runs, estimate.runs),
        ("tokens", ceiling.tokens, used.tokens, estimate.tokens),
        ("usd", ceiling.usd, used.usd, estimate.usd),
        ("sandbox_s", ceiling.sandbox_s, used.sandbox_s, estimate.sandbox_s),
    )
    for limit, bound, already, requested in checks:
        if bound is None:
            continue
        slack = USD_EPSILON if limit == "usd" else 0.0
        if already + requested > bound + slack:
            raise CeilingReached(
                f"{purpose} ceiling reached: {limit} {already:g} used + {requested:g} requested"
                f" > {bound:g}",
                purpose=purpose,
                limit=limit,
                ceiling=bound,
                used=already,
                requested=requested,
            )
