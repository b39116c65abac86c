"""`runner.sdk.pyparse`: parsing from several threads at once never corrupts the AST state.

CPython 3.11 raised ``SystemError: AST constructor recursion depth mismatch`` when threads
built parse trees at once while the collector ran finalizers (python/cpython#106905); a loaded
``submit`` lost a run to it as ``infra_error``. With plain ``ast.parse`` in `_parse_from_threads`
this test fails on 3.11.7 within a second (measured: 3 of 3 runs).
"""

from __future__ import annotations

import ast
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runner.sdk import pyparse

SOURCE = Path(pyparse.__file__).with_name("recorder.py").read_text()


class _Finalized:
    """A cycle member whose finalizer runs Python code: the collector lets threads switch."""

    def __del__(self) -> None:
        sum(range(50))


def _parse_from_threads(parse: Callable[[str], object], rounds: int) -> list[str]:
    errors: list[str] = []
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():  # bursts: garbage made no faster than it is finalized
            for _ in range(100):
                a, b = _Finalized(), _Finalized()
                a.other, b.other = b, a  # type: ignore[attr-defined]
            time.sleep(0.0005)

    def work() -> None:
        for _ in range(rounds):
            try:
                parse(SOURCE)
            except SystemError as exc:
                errors.append(str(exc))
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0001)
    try:
        churner = threading.Thread(target=churn)
        workers = [threading.Thread(target=work) for _ in range(4)]
        churner.start()
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        stop.set()
        churner.join()
    finally:
        sys.setswitchinterval(interval)
    return errors


def test_parse_from_four_threads_keeps_the_ast_state_whole() -> None:
    assert _parse_from_threads(pyparse.parse, rounds=40) == []


def test_parse_returns_what_ast_parse_returns() -> None:
    assert ast.dump(pyparse.parse("x = [1, 2]")) == ast.dump(ast.parse("x = [1, 2]"))
    tree = pyparse.parse("a + 1", mode="eval")
    assert isinstance(tree, ast.Expression)
