r"""An import's files as UTF-8 bytes: a string that is not Unicode text is refused, by field.

The strict decoder accepts a lone surrogate escape (``"\ud800"``: valid JSON text, not
encodable as UTF-8). The import encodes every file it will write before it writes or removes
anything (`runner.importers.output.write_import`), so such a value is an `InputError` naming
the run, the line and the JSON path of the field, and an earlier import under ``--force`` is
left as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.errors import InputError

__all__ = ["encoded"]


def encoded(text: str, file: str, what: str, value: Any = None) -> bytes:
    """``text`` as UTF-8; a lone surrogate is an `InputError` naming ``what`` and the field.

    Raises:
        InputError: ``text`` is not Unicode text (the field of ``value`` holding it named).
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        where = _surrogate_path(value, "") if value is not None else None
        raise InputError(
            f"{what}: a string holds a lone surrogate (a \\ud800-\\udfff escape without its"
            " pair): not Unicode text",
            file=file,
            field=where or None,
        ) from None


def _surrogate_path(value: Any, path: str) -> str | None:
    """The JSON path (``a.b[2]``) of the first string of ``value`` that is not Unicode text."""
    if isinstance(value, str):
        return None if _is_text(value) else (path or "(value)")
    if isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if not _is_text(str(key)):
                return f"{path or '(object)'} (a key)"
            found = _surrogate_path(item, sub)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _surrogate_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
