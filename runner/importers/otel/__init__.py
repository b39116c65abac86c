"""Import OpenTelemetry traces (the span families of `conventions`): one run per agent session.

Modules, in the order data flows:

- `runner.importers.otel.values`: AnyValue, ids (hex, base64, decimal), times, numbers;
- `runner.importers.otel.shapes`: files → spans and log records (OTLP/JSON, the older
  ``batches`` shape, Jaeger JSON, span lists and JSONL; streamed where the format allows);
- `runner.importers.otel.messages` and `runner.importers.otel.conventions`: what a span says
  (kind, messages, tool calls, usage, models) under each convention;
- `runner.importers.otel.sessions`: span trees, logical model calls, sessions;
- `runner.importers.otel.reader`: each session's conversation → `runner.importers.source`
  runs, written by `runner.importers.output.write_import` like every importer.

May import: the rest of `runner.importers`, `runner.trace` (the strict decoder), `runner.errors`,
the standard library.
"""

from runner.importers.otel.reader import read_otel

__all__ = ["read_otel"]
