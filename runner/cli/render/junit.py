r"""JUnit XML reports for CI (``reproduce --junit``, ``check --junit``): one writer for both.

A case passes, fails (``<failure>``: a negative verdict) or errors (``<error>``: the input or
the run could not be judged). Text XML 1.0 cannot carry (control characters from hostile traces
or sandbox output) is written as ``\xNN`` / ``\uNNNN``, so the file always parses.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

__all__ = ["JUnitCase", "write_junit_cases", "xml_text"]

# Characters XML 1.0 cannot carry: a reason quoting sandbox output (an escape sequence, a NUL)
# would make the whole JUnit file unparseable for CI. Compiled on first use, not at import
# (~10 ms for these ranges; `check` imports this module and writes JUnit only with --junit).
_NOT_XML = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


@functools.cache
def _not_xml() -> re.Pattern[str]:
    return re.compile(_NOT_XML)


def xml_text(text: str) -> str:
    r"""``text`` with every character XML 1.0 cannot carry written as ``\xNN`` (``\uNNNN``)."""

    def escaped(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _not_xml().sub(escaped, text)


@dataclass(frozen=True)
class JUnitCase:
    """One test case.

    Attributes:
        name: the case's name (a trace, a workflow file).
        classname: the command (``reproduce``, ``check``).
        text: the details, also written as ``system-out``.
        failure: the message of a negative verdict, or None.
        error: ``(type, message)`` when the case could not be judged, or None.
    """

    name: str
    classname: str
    text: str
    failure: str | None = None
    error: tuple[str, str] | None = None


def write_junit_cases(suite_name: str, cases: Sequence[JUnitCase], path: Path) -> None:
    """Write ``<testsuites><testsuite name=suite_name>`` with ``cases`` to ``path``.

    Messages are cut at 500 characters; the parent folder is created.
    """
    suite = ElementTree.Element(
        "testsuite",
        name=suite_name,
        tests=str(len(cases)),
        failures=str(sum(c.failure is not None for c in cases)),
        errors=str(sum(c.failure is None and c.error is not None for c in cases)),
    )
    for case in cases:
        element = ElementTree.SubElement(
            suite, "testcase", classname=case.classname, name=xml_text(case.name)
        )
        text = xml_text(case.text)
        if case.failure is not None:
            ElementTree.SubElement(
                element, "failure", message=xml_text(case.failure[:500])
            ).text = text
        elif case.error is not None:
            kind, message = case.error
            ElementTree.SubElement(
                element, "error", type=xml_text(kind), message=xml_text(message[:500])
            ).text = text
        ElementTree.SubElement(element, "system-out").text = text
    path.parent.mkdir(parents=True, exist_ok=True)
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
