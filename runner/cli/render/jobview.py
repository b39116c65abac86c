"""How ``submit`` and ``report`` show a job: the plan, the progress bar, the report, the page.

`ConsoleJobView` is the `runner.submit.runjob.JobView` of the terminal: the plan's lines (on
stderr under ``--json``, whose stdout is one JSON object), a progress bar with counts per status
on stderr when it is a terminal (it never moves back), the report as tables or JSON
(`print_report`) and the HTML page (`write_job_page`). A reader of stdout that goes away
(``| head``) silences the output and changes nothing else: the job's exit code stands.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from runner.cli.render.console import line_width, table_console, wrap_lines
from runner.cli.render.html import render_job, write_page
from runner.cli.render.jsonout import print_json
from runner.cli.render.report import render_report
from runner.cli.render.terminal import echo, stdout_gone
from runner.cli.render.verdict import write_gate_junit
from runner.hostlog import get_logger

if TYPE_CHECKING:
    from runner.submit.jobreport import JobReport
    from runner.submit.scheduler import PairOutcome

__all__ = ["ConsoleJobView", "JobProgress", "print_report", "write_job_page"]

log = get_logger(__name__)


class JobProgress:
    """Counts per status on a rich progress bar (stderr, TTY only), with an ETA.

    The ETA is rich's `TimeRemainingColumn`: the remaining runs at the speed measured over
    this session's finished runs (rich's moving window, 30 s), shown once one run finished.

    Args:
        total: the job's planned runs.
        finished: runs finished in earlier sessions of a resumed job (the bar starts there).
    """

    def __init__(self, total: int, finished: int = 0) -> None:
        self.enabled = sys.stderr.isatty()
        self.progress = Progress(
            TextColumn("[bold]replay[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=table_console(stderr=True),
            transient=False,
        )
        self.task = self.progress.add_task("", total=total, completed=finished)
        self.before = finished
        self.shown = finished
        self.lock = threading.Lock()  # updates come from worker threads, in any order

    def __enter__(self) -> JobProgress:
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

    def update(self, outcomes: Sequence[PairOutcome]) -> None:
        """Show the counts of ``outcomes`` (a snapshot of every pair), unless older than shown."""
        if not self.enabled:
            return
        counts: dict[str, int] = {}
        for outcome in outcomes:
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
        finished = self.before + sum(
            n for s, n in counts.items() if s not in ("running", "not_run")
        )
        text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s != "not_run")
        with self.lock:  # an older snapshot rendered late must not move the bar back
            if finished < self.shown:
                return
            self.shown = finished
            self.progress.update(self.task, completed=finished, description=text)


def print_report(report: JobReport, as_json: bool) -> None:
    """A job's report on stdout (a table, or JSON); a reader gone away (``| head``) is no error."""
    try:
        if as_json:
            print_json(report.to_json())
        else:
            render_report(report, table_console())
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()


def write_job_page(report: JobReport, path: Path) -> Path | None:
    """Write the job's HTML page to ``path``; None when it cannot be written (said, logged).

    The page is a view of ``report.json``, which is written first and is the record: a page
    that fails (a full disk, a bug) never changes the job's exit code.
    """
    try:
        return write_page(path, render_job(report))
    except Exception as exc:  # the view must not hide the verdict
        log.exception("html_report_not_written", path=str(path))
        echo(f"HTML report not written ({type(exc).__name__}: {exc})", err=True)
        return None


class ConsoleJobView:
    """`runner.submit.runjob.JobView` on the terminal.

    Args:
        as_json: ``--json``: stdout is one JSON object; every other line goes to stderr.
        junit: ``--junit FILE``: the gate's verdicts as JUnit XML, one case per candidate
            (`runner.cli.render.verdict.write_gate_junit`), written with the report.
    """

    def __init__(self, *, as_json: bool, junit: Path | None = None) -> None:
        self.as_json = as_json
        self.junit = junit

    def plan(self, lines: Sequence[str]) -> None:
        """Print the plan's lines (stderr under ``--json``), wrapped to the terminal's width."""
        try:
            stream = sys.stderr if self.as_json else sys.stdout
            for line in wrap_lines(lines, line_width(stream)):
                echo(line, err=self.as_json)
        except BrokenPipeError:
            stdout_gone()  # the reader left; the job still runs and its exit code stands

    def dry_run(self, plan: dict[str, Any]) -> None:
        """Under ``--json``, print ``{"plan": ...}`` (the lines said it all otherwise)."""
        if not self.as_json:
            return
        try:
            print_json({"plan": plan})
        except BrokenPipeError:
            stdout_gone()

    @contextmanager
    def progress(
        self, total: int, finished: int
    ) -> Iterator[Callable[[Sequence[PairOutcome]], None]]:
        """A `JobProgress` bar while the job runs; yields its ``update``."""
        with JobProgress(total, finished) as bar:
            yield bar.update

    def report(self, report: JobReport) -> None:
        """Print the report (`print_report`); write the gate's JUnit file when asked."""
        if self.junit is not None and report.gate:
            write_gate_junit(report.gate, self.junit)
        print_report(report, self.as_json)

    def page(self, report: JobReport, path: Path) -> Path | None:
        """Write the page (`write_job_page`)."""
        return write_job_page(report, path)

    def say(self, line: str) -> None:
        """Print a line of information (stderr under ``--json``)."""
        echo(line, err=self.as_json)

    def hint(self, line: str) -> None:
        """Print the resume hint on stderr."""
        echo(line, err=True)
