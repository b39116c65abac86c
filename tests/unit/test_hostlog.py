"""`runner.hostlog`: structlog imported on the first line logged, the CLI's format still applied.

Each case runs in a fresh interpreter (structlog not imported yet, as in the console script):
a logger made at import time, before `runner.cli.log.configure_logging`, logs in the
configured format and level; a call below the level imports nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = """
import logging, sys
from runner.hostlog import get_logger
log = get_logger("runner.t")  # module top: before the CLI configures logging
from runner.cli.log import configure_logging
configure_logging({fmt!r}, logging.{level})
log.debug("not_shown", n=1)
print("loaded" if "structlog" in sys.modules else "not loaded")
{calls}
"""


def _run(fmt: str, level: str, calls: str) -> tuple[str, str]:
    code = _PROBE.format(fmt=fmt, level=level, calls=calls)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), proc.stderr.strip()


def test_a_line_below_the_level_imports_nothing_and_the_first_line_follows_the_format() -> None:
    out, err = _run("json", "INFO", 'log.info("container_started", run_id="r1", start_s=0.2)')
    assert out == "not loaded"
    record = json.loads(err)  # one line, JSON, on stderr: the configuration applied
    assert record["event"] == "container_started" and record["run_id"] == "r1"
    assert record["level"] == "info" and "timestamp" in record


@pytest.mark.parametrize("level", ["DEBUG", "INFO"])
def test_the_configured_level_filters_after_structlog_is_loaded(level: str) -> None:
    calls = 'log.warning("first", a=1); log.debug("later_debug"); log.error("later_error")'
    _, err = _run("json", level, calls)
    events = [json.loads(line)["event"] for line in err.splitlines()]
    if level == "DEBUG":
        assert events == ["not_shown", "first", "later_debug", "later_error"]
    else:
        assert events == ["first", "later_error"]


def test_console_format_and_exceptions() -> None:
    calls = 'try:\n    1/0\nexcept ZeroDivisionError:\n    log.exception("boom", path="p")'
    _, err = _run("console", "INFO", calls)
    assert "boom" in err and "path=p" in err and "ZeroDivisionError" in err
    assert not err.startswith("{")


def test_threads_logging_their_first_lines_at_once_all_get_the_configuration() -> None:
    calls = (  # a slow configuration (0.3 s) keeps the window open for the other threads
        "import threading, time\n"
        "import runner.hostlog as hostlog\n"
        "real = hostlog._pending.apply\n"
        "def slow():\n"
        "    time.sleep(0.3)\n"
        "    real()\n"
        "hostlog._pending.apply = slow\n"
        "gate = threading.Barrier(8)\n"
        "def first(n):\n"
        "    gate.wait()\n"
        "    log.info('thread_started', n=n)\n"
        "threads = [threading.Thread(target=first, args=(n,)) for n in range(8)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()"
    )
    out, err = _run("json", "INFO", calls)
    assert out == "not loaded"  # no line on stdout (structlog's defaults print there)
    assert sorted(json.loads(line)["n"] for line in err.splitlines()) == list(range(8))


def test_the_level_numbers_are_loggings() -> None:
    import logging

    from runner.hostlog import LEVELS

    assert {name: getattr(logging, name.upper()) for name in LEVELS} == LEVELS
