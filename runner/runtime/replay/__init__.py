"""Calls of an episode: index, clock, execute or serve, and the trace call record of each.

Standard library only, Python 3.9+; mounted into sandboxes.

Modules: ``calls`` (`Caller`: every tool and model call), ``clock`` (the injected clock),
``callrecords`` (pure helpers of call records), ``recordings`` (observations served in shadow,
trace calls served by position in reproduce), ``rawserve`` (a raw I/O record answering the SDK
helper's requests while a tool's code runs again).

May import: the standard library, `runner.wire.errors`, `runner.runtime.registry`,
`runner.sdk`, `runner.trace` and `runner.errors`.
"""

__all__ = ["calls", "recordings"]
