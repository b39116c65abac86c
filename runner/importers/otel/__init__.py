"""Import OpenTelemetry traces (the span families of `conventions`): one run per agent session.

Modules, in the order data flows:

- `runner.importers.otel.values`: AnyValue, ids (hex, base64, decimal), times, numbers;
- `runner.importers.otel.files` and `runner.importers.otel.shapes`: files → spans and log
  records (OTLP/JSON, the older ``batches`` shape, Jaeger JSON, span lists and JSONL, capture
  wrappers; streamed where the format allows), each span classified when read;
- `runner.importers.otel.conventions`: the conventions table, each span's family and role;
- `runner.importers.otel.messages`, `modelspans`, `toolspans`: what a span says (messages,
  tool calls, usage, models) under each convention;
- `runner.importers.otel.spantree`: span trees and log records tied to spans;
- `runner.importers.otel.sessions`: logical model calls, tool calls, sessions;
- `runner.importers.otel.turns`: a session's conversation (executed tool spans as calls);
- `runner.importers.otel.reader`: sessions and sub-agents → `runner.importers.source` runs,
  written by `runner.importers.output.write_import` like every importer;
- `runner.importers.otel.explain`: what was read and ignored, for ``--explain``.

May import: the rest of `runner.importers`, `runner.trace` (the strict decoder), `runner.errors`,
the standard library.
"""

from runner.importers.otel.reader import read_otel

__all__ = ["read_otel"]
