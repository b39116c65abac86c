"""The HTML report: one self-contained page per job, reproduce or trace, and a local viewer.

- ``render``: templates (jinja2, autoescaped), inline CSS/script/data, the page's CSP;
  `render_reproduce`, `render_trace`, `write_page`;
- ``job``: ``report.json`` as the job page's context and data, `render_job`;
- ``episodes``: traces read as streams into capped records; ``charts``: the rating chart's
  geometry; ``diff``: the first differing call side by side;
- ``messages``: model requests and replies (three APIs, streams) as plain messages;
  ``conversation``: an episode's turns as their new messages and replies, refusals, one call
  alone (reproduce's first difference);
- ``serve``: `serve_page`, the page on 127.0.0.1 (``sandbox-replay view``).

May import what the CLI may. Everything shown from a trace, a task or a sandbox is untrusted:
escaped by the templates, serialised for the script by ``tojson``, shown by it as text only.
"""

from runner.cli.render.html.job import render_job
from runner.cli.render.html.render import render_reproduce, render_trace, write_page

__all__ = ["render_job", "render_reproduce", "render_trace", "write_page"]
