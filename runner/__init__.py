"""sandbox-replay: re-run AI-agent tasks in sandboxes with egress blocked.

The package map is in docs/internals.md. This file must stay importable with the standard
library alone on Python 3.9: it is mounted into sandboxes together with the sandbox-side
packages (`runner.wire.protocol.SANDBOX_PACKAGES`: errors, trace, sdk, wire, runtime), where
`runner.sdk` and `runner.runtime` are imported. Nothing else of the package is mounted.
May import: the standard library only.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
