"""sandbox-replay: re-run AI-agent tasks in sandboxes with egress blocked.

This file must stay importable with the standard library alone on Python 3.9: the package
directory is mounted into sandboxes, where `runner.sdk` and `runner.runtime` are imported.
"""

__version__ = "0.1.0"
