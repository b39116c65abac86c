"""The exception hierarchy of sandbox-replay, and the exit code each family maps to.

Standard library only, Python 3.9+: the in-sandbox runtime and `runner.sdk` raise these too.

    SandboxReplayError                 root; never raised itself
    ├── InputError              (2)    the user fixes a file or a flag: file, line, field
    ├── IneligibleError         (3)    a workflow cannot be sandboxed (names every problem)
    ├── CeilingReached          (4)    a spend ceiling stopped replay
    ├── ReplayRefused           (5)    strict replay would not start: what is missing
    ├── InfrastructureError     (6)    Docker unusable or failing; never a verdict
    │   └── TransientInfrastructureError   the only family that is retried
    ├── ReplayDivergence        (1)    a replayed call did not match its recording
    ├── ToolNotResolvable       (3)    a tool id absent from a (capability-filtered) registry
    ├── CapabilityDenied        (3)    a denied tool's function was called directly
    └── GradingError            (1)    a judge failed

May import: the standard library only (mounted into sandboxes, with `runner.sdk`,
`runner.trace` and `runner.runtime`).

Exit codes are those of SPEC.md ("Exit codes — one scheme for every command"); the CLI is the
one boundary that turns an exception into an exit code (`exit_code_for`).
"""

from typing import Any, Dict, Optional

__all__ = [
    "EXIT_CEILING",
    "EXIT_INCONCLUSIVE",
    "EXIT_INELIGIBLE",
    "EXIT_INFRA",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_NEGATIVE",
    "EXIT_OK",
    "EXIT_REFUSED",
    "CapabilityDenied",
    "CeilingReached",
    "GradingError",
    "IneligibleError",
    "InfrastructureError",
    "InputError",
    "ReplayDivergence",
    "ReplayRefused",
    "SandboxReplayError",
    "ToolNotResolvable",
    "TransientInfrastructureError",
    "worst_exit_code",
]

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_INPUT = 2
EXIT_INELIGIBLE = 3
EXIT_CEILING = 4
EXIT_REFUSED = 5
EXIT_INFRA = 6
EXIT_INCONCLUSIVE = 7  # a gate could not tell a regression from noise (more repeats would)
EXIT_INTERRUPTED = 130

# SPEC.md: "With several inputs, the worst wins, in the order 130, 6, 2, 5, 3, 4, 1, 7, 0."
# Inconclusive (7) is worse than nothing to report, better than any definite failure: a
# negative verdict or a stopped job says more than "cannot tell yet".
_SEVERITY = (
    EXIT_INTERRUPTED,
    EXIT_INFRA,
    EXIT_INPUT,
    EXIT_REFUSED,
    EXIT_INELIGIBLE,
    EXIT_CEILING,
    EXIT_NEGATIVE,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
)


def worst_exit_code(*codes: int) -> int:
    """Return the worst of several exit codes by SPEC.md's order.

    The order: 130 > 6 > 2 > 5 > 3 > 4 > 1 > 7 > 0 (7, inconclusive, just above 0).

    Args:
        codes: exit codes of the scheme; an empty call returns 0.

    Raises:
        ValueError: a code that is not part of the scheme.
    """
    for code in codes:
        if code not in _SEVERITY:
            raise ValueError(f"exit code {code} is not part of the scheme")
    return min(codes, key=_SEVERITY.index) if codes else EXIT_OK


class SandboxReplayError(Exception):
    """Root of every error this project raises on purpose.

    Attributes:
        exit_code: the CLI exit code of SPEC.md this error maps to.
        fields: structured context (file, line, field, run_id, step, tool_id, ...), also shown
            in JSON output and logs.
    """

    exit_code = EXIT_NEGATIVE

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields: Dict[str, Any] = {k: v for k, v in fields.items() if v is not None}

    def __str__(self) -> str:
        return self.message


class InputError(SandboxReplayError):
    """Invalid input or usage: a bad file, unknown key, unreadable trace (exit 2).

    The message starts with the location (``file:line: field``) when one is known.
    """

    exit_code = EXIT_INPUT

    def __init__(
        self,
        message: str,
        *,
        file: Optional[str] = None,
        line: Optional[int] = None,
        field: Optional[str] = None,
        **fields: Any,
    ) -> None:
        where = ""
        if file is not None:
            where = str(file) + (f":{line}" if line is not None else "") + ": "
        if field is not None:
            where += f"{field}: "
        super().__init__(where + message, file=file, line=line, field=field, **fields)


class IneligibleError(SandboxReplayError):
    """A workflow cannot be sandboxed (exit 3). ``problems`` lists every diagnostic line."""

    exit_code = EXIT_INELIGIBLE

    def __init__(self, message: str, problems: Any = (), **fields: Any) -> None:
        super().__init__(message, **fields)
        self.problems = list(problems)


class CeilingReached(SandboxReplayError):
    """A spend ceiling stopped replay or a model call (exit 4)."""

    exit_code = EXIT_CEILING


class ReplayRefused(SandboxReplayError):
    """Strict replay would not start: a required field, tool or version is missing (exit 5)."""

    exit_code = EXIT_REFUSED


class InfrastructureError(SandboxReplayError):
    """Docker (or another backend) is unusable or failed; never a verdict about the run (exit 6)."""

    exit_code = EXIT_INFRA


class TransientInfrastructureError(InfrastructureError):
    """An infrastructure failure worth retrying (timeouts, 5xx from the engine, conflicts)."""


class ReplayDivergence(SandboxReplayError):
    """A replayed call had no recording or differed from it (a negative verdict, exit 1)."""


class ToolNotResolvable(SandboxReplayError):
    """A tool id is absent from a registry view: unknown, or removed by a capability filter.

    Raised by ``Registry.resolve``; the message names the tool, its effect class (when the tool
    exists but is denied) and the policy rule that removed it.
    """

    exit_code = EXIT_INELIGIBLE


class CapabilityDenied(SandboxReplayError):
    """A denied tool's function was called directly while a replay context was active.

    Nothing of the tool executed. This is the call-time half of the defence in depth; the
    load-time check (`sandbox-replay check`) is the good error, this is the guarantee.
    """

    exit_code = EXIT_INELIGIBLE


class GradingError(SandboxReplayError):
    """A judge could not grade a group of episodes."""
