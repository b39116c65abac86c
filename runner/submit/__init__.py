"""A submission: N variants × M tasks in sandboxes, graded, under ceilings (``submit``).

``options`` (flags or a job file) → ``plan`` (pairs, judge calls, ceilings, cost) →
``scheduler`` (concurrency, stop signal, leftovers) runs ``pairs`` (one metered episode per
(variant, task)) → ``report`` (grading hand-off to `runner.grading`, ``report.json``); ``job``
ties them together (`prepare`, `execute`, resume). Rendering of the report is the CLI's
(`runner.cli.render.report`).

May import: `runner.admission`, `runner.episode`, `runner.tools` and everything below them
(providers, backends, ledger, grading, policy, domain, tracetools, settings, sdk, trace,
errors); never reproduce, runs, importers or cli.
"""

from runner.submit.job import SubmitResult, execute, prepare
from runner.submit.jobfolder import job_dir
from runner.submit.options import SubmitOptions, load_job_file
from runner.submit.plan import Plan, build_plan
from runner.submit.report import build_report, grade_job, write_report
from runner.submit.scheduler import PairOutcome, Scheduler
from runner.submit.variants import Variant

__all__ = [
    "PairOutcome",
    "Plan",
    "Scheduler",
    "SubmitOptions",
    "SubmitResult",
    "Variant",
    "build_plan",
    "build_report",
    "execute",
    "grade_job",
    "job_dir",
    "load_job_file",
    "prepare",
    "write_report",
]
