"""``ast.parse`` serialised across the threads of one process. Standard library only, 3.9+.

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so two
threads converting parse trees at once can corrupt each other's count and one of them fails
with ``SystemError: AST constructor recursion depth mismatch (before=57, after=53)``
(python/cpython#106905; the fix there covers only the error paths, the race remains in
3.11.7). The host parses user code from several threads at once (a ``submit`` prepares four
episodes concurrently: each reads its tool modules and agent code with `ast`), and under load
that race turned one run of a job into ``infra_error`` (measured: 1 of 3 loaded runs of
tests/integration/test_program_gateway.py's four-sandbox ceiling test). Every ``ast.parse`` of
the project goes through `parse`, which holds one process-wide lock while the tree is built;
walking the finished tree needs no lock.
"""

import ast
import threading
from typing import Any, Union

__all__ = ["parse"]

_LOCK = threading.Lock()


def parse(source: Union[str, bytes], filename: str = "<unknown>", mode: str = "exec") -> Any:
    """`ast.parse` of ``source``, one thread at a time.

    Args:
        source: Python source text or bytes (decoded by the parser's own rules).
        filename: shown in a `SyntaxError`.
        mode: ``"exec"`` or ``"eval"``, as for `ast.parse`.

    Returns:
        The `ast.Module` (``exec``) or `ast.Expression` (``eval``).

    Raises:
        SyntaxError, ValueError, RecursionError, MemoryError: as `ast.parse` does.
    """
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
