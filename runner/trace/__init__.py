"""The trace (episode) format: version, statuses, bodies, failure signature, the line writer.

Standard library only, Python 3.9+: mounted into sandboxes (`runner.wire.protocol.
SANDBOX_PACKAGES`); the runtime, the SDK's recorder, the host's episode driver and the importers
all produce trace lines with these rules (docs/trace-format.md, SPEC.md "Trace (episode)
format"). Reading traces, with limits, is host-side: `runner.tracetools`.

Modules: ``format`` (version, statuses, exit codes, bodies, failure signature; its names are
re-exported), ``writer`` (the JSONL writer: ``run`` header, ``call`` lines, ``end`` line; a
submodule of the surface, not imported here: the runtime's start path stays free of pathlib).

May import: the standard library and `runner.errors`. Canonical JSON is ``strictjson``'s.
"""

from runner.trace.format import (
    MAX_BODY_BYTES,
    STATUSES,
    TRACE_VERSION,
    decode_body,
    encode_body,
    episode_exit_code,
    failure_signature,
)

__all__ = [
    "MAX_BODY_BYTES",
    "STATUSES",
    "TRACE_VERSION",
    "decode_body",
    "encode_body",
    "episode_exit_code",
    "failure_signature",
    "writer",
]
