"""What makes two outbound attempts the same destination, and how many are kept. Stdlib only.

The runtime's audit hook and egress witness report each destination once per process, then only
count it (`runner.runtime.egress`); the host merges the reports of every process of a sandbox
into the end line's outbound-destination log (`runner.episode.outbound`). Both sides key a
destination the same way and keep the same number of them.
"""

from typing import Any, Dict, Tuple

__all__ = ["MAX_DESTINATIONS", "destination_key"]

MAX_DESTINATIONS = 1000
"""Distinct destinations kept per process, and by the host over all of them; attempts at
further ones are counted (``{"type": "egress", "dropped": n, "cap": MAX_DESTINATIONS}``) and
make the log's coverage ``partial``."""


def destination_key(attempt: Dict[str, Any]) -> Tuple[Any, Any, Any]:
    """What makes two attempts the same destination: (kind, host or else address, port)."""
    host = attempt.get("host")
    return (
        attempt.get("kind"),
        host if host is not None else attempt.get("address"),
        attempt.get("port"),
    )
