r"""Render report pages: one self-contained HTML file, inert whatever the data holds.

The page carries its CSS, its script and its data inline and loads nothing (it opens from disk,
offline). Safety rests on three layers, each enough on its own for markup in the data:

1. jinja2 with autoescaping on for every template: any text from a trace, a task or a sandbox
   reaches the markup escaped (``<script>`` shows as text; an attribute value cannot be left);
2. the data for the script goes through jinja2's ``tojson`` (``<``, ``>``, ``&`` and ``'``
   written as ``\u003c`` ...), inside ``<script type="application/json">``, which never runs;
   the script reads it with ``JSON.parse`` and shows it with ``textContent`` only;
3. a Content-Security-Policy in the page: ``default-src 'none'``, the one style and the one
   script allowed by their sha256 — an injected script or handler would not run, and nothing
   (image, font, fetch, form) could be loaded from or sent to anywhere.

Bytes: the page is UTF-8; a lone surrogate from a trace (JSON allows ``"\ud800"``) is written
as ``\ud800`` text, never an encoding error.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

import runner
from runner.cli.render.html.conversation import call_view
from runner.cli.render.html.diff import side_by_side
from runner.cli.render.html.episodes import SOURCES, Capper, read_episode
from runner.cli.render.reproduce import failure_words
from runner.reproduce.report import ReproduceReport

__all__ = ["page_bytes", "render_page", "render_reproduce", "render_trace", "write_page"]

TEMPLATES = Path(__file__).parent / "templates"
SIDES = ("recorded", "replayed")


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def _static(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def content_security_policy(css: str, js: str, *, header: bool = False) -> str:
    """The page's CSP: nothing loads; only our own style and script, by hash.

    Args:
        css: the page's style (allowed by its sha256).
        js: the page's script (allowed by its sha256).
        header: for an HTTP header (``view``): adds ``frame-ancestors 'none'``, a directive
            browsers ignore, with a console error, in a ``<meta>`` policy (CSP 3, §6.4.2).
    """
    policy = (
        "default-src 'none'; "
        f"style-src '{_sha256(css)}'; "
        f"script-src '{_sha256(js)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return policy + "; frame-ancestors 'none'" if header else policy


def content_security_policy_of(html: str) -> str:
    """The CSP header for a rendered page (``view``): the same for every page."""
    return content_security_policy(_static("report.css"), _static("report.js"), header=True)


def render_page(template: str, context: Mapping[str, Any], data: Any) -> str:
    """Render ``template`` (autoescaped) with the page's CSS, script, CSP and ``data``.

    Args:
        template: a file of ``templates/``.
        context: the template's values (escaped where shown).
        data: the page script's data (``tojson`` into ``#report-data``).
    """
    css, js = _static("report.css"), _static("report.js")
    if isinstance(data, dict):
        data = {**data, "sources": SOURCES}
    return (
        _environment()
        .get_template(template)
        .render(
            **context,
            data=data,
            # our own files, not data: the only markup not escaped (and allowed by the CSP hash)
            css=Markup(css),  # noqa: S704
            js=Markup(js),  # noqa: S704
            csp=content_security_policy(css, js),
            version=runner.__version__,
        )
    )


def render_reproduce(reports: Sequence[ReproduceReport]) -> str:
    """The page of a reproduce: per trace the outcome, first difference, environment, egress.

    At the first difference the two calls (recorded, replayed) are shown side by side as the
    conversation shows a call (`call_view`: a turn's messages and reply, a tool's arguments,
    result, error or refusal), then as JSON diffed line by line (`side_by_side`).

    Args:
        reports: the verdict on each trace.
    """
    items = []
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.outcome] = counts.get(report.outcome, 0) + 1
        calls = report.difference_calls or {}
        diff = None
        if report.first_difference and calls:
            diff = side_by_side(calls.get("recorded"), calls.get("replayed"))
        said = {side: failure_words((getattr(report, side) or {}).get("failure")) for side in SIDES}
        sides = None
        if report.first_difference and calls:
            sides = {side: call_view(calls.get(side), Capper().text) for side in SIDES}
        items.append({**report.to_json(), "diff": diff, "sides": sides, "failure_words": said})
    data = {"kind": "reproduce", "reports": items}
    return render_page("reproduce.html.j2", {"items": items, "counts": counts}, data)


def render_trace(path: Path) -> str:
    """The page of one trace file: its run, calls, model turns, outbound, status."""
    episode = read_episode(path)
    run = episode.get("run") or {}
    end = episode.get("end") or {}
    pair = {
        "variant": run.get("workflow", "?"),
        "task_id": run.get("task_id", "?"),
        "status": end.get("status", "unreadable" if episode.get("error") else "no end line"),
        "repeat": 0,
    }
    data = {"kind": "trace", "episodes": {"0": episode}}
    return render_page("trace.html.j2", {"ep": episode, "pair": pair, "name": path.name}, data)


def page_bytes(html: str) -> bytes:
    r"""The page as UTF-8; a lone surrogate becomes ``\udXXX`` text."""
    return html.encode("utf-8", errors="backslashreplace")


def write_page(path: Path, html: str) -> Path:
    """Write the page atomically (a temporary file in the same folder, then a rename).

    Raises:
        OSError: the folder cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(page_bytes(html))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
