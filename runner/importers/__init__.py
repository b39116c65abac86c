"""Importers of public agent traces: τ²-bench results and OpenAI chat-message datasets.

Each adapter reads its source into an `ImportSource` (`runner.importers.imported`); the shared
builder (`runner.importers.conversation`) turns every conversation into a trace of this project
and the task's observations; `write_import` writes traces, tasks, the registry manifest of the
source's tools (`runner.importers.toolset`), the generic agent workflow and an import report.

Invariant: nothing is invented. What a source lacks (a model id read from a response, the raw
HTTP body, an outbound log, a clock) stays absent and is counted in ``import-report.json``, so
that ``lint`` reports it.

May import: `runner.domain`, `runner.wire` (the tool record), `runner.trace`, `runner.sdk`,
`runner.errors`; never episode, submit, reproduce or cli (an import never starts a sandbox).
"""

from runner.importers.imported import ImportSource, WorkflowShape
from runner.importers.openai_messages import read_openai_messages, read_tools_file
from runner.importers.output import write_import
from runner.importers.tau2 import read_tau2, read_tau2_tools

__all__ = [
    "ImportSource",
    "WorkflowShape",
    "read_openai_messages",
    "read_tau2",
    "read_tau2_tools",
    "read_tools_file",
    "write_import",
]
