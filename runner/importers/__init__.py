"""Importers of public agent traces: τ²-bench results and OpenAI chat-message datasets.

Each adapter reads its source into an `ImportSource` (`runner.importers.output`); the shared
builder (`runner.importers.conversation`) turns every conversation into a trace of this project
and the task's observations; `write_import` writes traces, tasks, the registry manifest of the
source's tools (`runner.importers.toolset`), the generic agent workflow and an import report.

Invariant: nothing is invented. What a source lacks (a model id read from a response, the raw
HTTP body, an outbound log, a clock) stays absent and is counted in ``import-report.json``, so
that ``lint`` reports it.
"""
