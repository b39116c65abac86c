"""What the commands print or write: terminal text and tables, JSON, JUnit XML, HTML pages.

``terminal`` (the one inert-text rule, `echo`), ``jsonout`` (the ``--json`` output),
``console`` (rich consoles for tables), ``report`` (a submission's report as tables),
``jobview`` (how ``submit`` shows a job: plan, progress bar, report, page), ``episode`` (a run's
summary), ``reproduce`` (verdicts, their table and JUnit cases), ``junit`` (JUnit XML for CI),
``html/`` (the report pages and their local viewer). Rendering reads results; it computes no
verdict, opens no ledger and starts no sandbox.

May import: the result types of the use cases (`runner.submit`, `runner.reproduce`, ...), the
packages below them for their types, `runner.tracetools` (the HTML page's capped trace reads),
rich, jinja2; never a command (`runner.cli.commands`).
"""

__all__: list[str] = []
