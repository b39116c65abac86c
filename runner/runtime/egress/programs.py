"""Which child processes escape the outbound-destination hook (`runner.runtime.egress.audit`).

Standard library only, Python 3.9+; no side effects, so that every rule is testable on its own.
A child is covered when it is a Python interpreter that will load ``sitecustomize`` (no ``-I``,
``-E`` or ``-S``; an environment that keeps the runtime's ``PYTHONPATH`` and log variable).
Anything else makes coverage partial. A shell ``-c`` command is judged by its first word
(after ``VAR=value`` prefixes): a plain ``python3 ...`` command is a Python child; a command
with ``;``, ``&``, ``|``, backquotes or ``$(`` may run anything and counts as non-Python.

The same ``sitecustomize`` installs the run's clock (`runner.sdk.wallclock`), so every
finding also says ``clock: "machine"``: that child reads the machine's clock, not the run's. A
Python child that loads the hook but gets an explicit environment without the clock variable
is a finding of its own (``clock`` only).
"""

import os
import sys
from typing import Any, Dict, List, Optional, Tuple

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "busybox", "ksh"})
Finding = Tuple[Tuple[Any, ...], Dict[str, Any]]


def is_python_program(program: str) -> bool:
    """True when ``program`` (a path or name) is a Python interpreter."""
    name = os.path.basename(program)
    if name.startswith("python") and all(c.isdigit() or c == "." for c in name[6:]):
        return True
    try:
        return bool(sys.executable) and os.path.realpath(program) == os.path.realpath(
            sys.executable
        )
    except (OSError, ValueError):
        return False


def python_skips_hook(argv: List[str]) -> Optional[str]:
    """The flag (``-I``, ``-E``, ``-S``) that makes a Python child skip ``sitecustomize``."""
    takes_value = set("WXQ")
    skip_next = False
    for arg in argv[1:]:
        if skip_next:
            skip_next = False
            continue
        if not arg.startswith("-") or arg in ("-", "--") or arg.startswith("--"):
            break
        flags = arg[1:]
        for i, flag in enumerate(flags):
            if flag in "IES":
                return "-" + flag
            if flag in ("c", "m"):
                return None
            if flag in takes_value:
                skip_next = i == len(flags) - 1
                break
    return None


def _str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def env_drops_hook(env: Any, env_log: str, site_dir: str) -> bool:
    """True when an explicit child environment lacks the log variable or our ``PYTHONPATH``."""
    if env is None:
        return False
    try:
        items = {_str(k): _str(v) for k, v in dict(env).items()}
    except Exception:
        return True
    return env_log not in items or site_dir not in items.get("PYTHONPATH", "").split(os.pathsep)


def env_drops_clock(env: Any, env_clock: Optional[str]) -> bool:
    """True when the parent has the run's clock and an explicit child environment lacks it."""
    if env is None or env_clock is None:
        return False
    try:
        return env_clock not in {_str(k) for k in dict(env)}
    except Exception:
        return True


MACHINE_CLOCK = "machine"


def classify(
    program: Optional[str],
    argv: List[str],
    env: Any,
    env_log: str,
    site_dir: str,
    env_clock: Optional[str] = None,
) -> Optional[Finding]:
    """Judge one child process.

    Args:
        program: the executable (None: ``argv[0]``).
        argv: its arguments, ``argv[0]`` included.
        env: its explicit environment, or None when it inherits the parent's.
        env_log: name of the runtime's child-log variable.
        site_dir: the folder holding our ``sitecustomize``.
        env_clock: name of the clock variable when the parent runs the run's clock, else None.

    Returns:
        None when the child is covered, else ``(dedup key, coverage fields)``; the fields
        carry ``clock: "machine"`` when the child reads the machine's clock.
    """
    program = program or (argv[0] if argv else "")
    name = os.path.basename(program)
    if name in SHELLS and "-c" in argv[1:-1]:
        return classify_command(argv[argv.index("-c", 1) + 1], env, env_log, site_dir, env_clock)
    if is_python_program(program):
        flag = python_skips_hook(argv)
        if flag is not None:
            return ("flag", program, flag), {
                "reason": "python child started with " + flag + ": the audit hook is not loaded",
                "program": program,
                "clock": MACHINE_CLOCK,
            }
        if env_drops_hook(env, env_log, site_dir):
            return ("env", program), {
                "reason": "python child started with an environment without the audit hook",
                "program": program,
                "clock": MACHINE_CLOCK,
            }
        if env_drops_clock(env, env_clock):
            return ("clock", program), {
                "reason": "python child started with an environment without the run's clock "
                "({}): it reads the machine's clock".format(env_clock),
                "program": program,
                "clock": MACHINE_CLOCK,
            }
        return None
    return ("program", program), {
        "reason": "non-Python child process",
        "program": program,
        "argv": " ".join(argv),
        "clock": MACHINE_CLOCK,
    }


def classify_command(
    command: str, env: Any, env_log: str, site_dir: str, env_clock: Optional[str] = None
) -> Optional[Finding]:
    """Judge a shell command (``os.system``, ``sh -c``); see `classify`."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # VAR=value prefixes
    if words and is_python_program(words[0]) and not any(c in command for c in ";&|`$("):
        return classify(words[0], words, env, env_log, site_dir, env_clock)
    return ("command", command), {
        "reason": "non-Python child process (shell command)",
        "program": command,
        "clock": MACHINE_CLOCK,
    }
