"""Reproduce: replay recorded episodes in the sandbox, strict, and judge the outcome.

``inputs`` expands traces, folders and reviewer packets (safe extraction) and finds the
workflow; ``reproducer`` decides whether strict replay can start (refusals), runs the recorded
workflow under the ``reproduce`` policy and builds the `ReproduceReport`; ``diff`` compares the
replayed run with the recording (first difference, verdict, environment diff); ``packet``
writes a reviewer packet.

May import: `runner.admission` and everything below it; never submit, runs, importers or cli.
"""

from runner.reproduce.diff import first_difference, verdict
from runner.reproduce.envdiff import environment_diff
from runner.reproduce.inputs import expand_inputs, is_packet
from runner.reproduce.packet import build_packet
from runner.reproduce.report import ReproduceReport
from runner.reproduce.reproducer import Reproducer, refusals

__all__ = [
    "ReproduceReport",
    "Reproducer",
    "build_packet",
    "environment_diff",
    "expand_inputs",
    "first_difference",
    "is_packet",
    "refusals",
    "verdict",
]
