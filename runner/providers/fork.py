"""The anchored fork's provider: the prefix's recorded turns first, then the fresh provider.

An anchored fork (``reproduce --fork-at K --workflow NEW``, ``submit --anchor``) replays a
trace's first K calls and continues fresh. Its model and simulated-user turns are answered per
role: the turns the prefix recorded (those with a call index below K) by a `ReplayProvider`
over the prefix alone (matched strictly, as reproduce matches them), every later turn by the
new workflow's own provider (scripted or a gateway, per its model block). A prefix turn that
does not match its recording breaks the fork: that turn is answered with the replay's
``ReplayDivergence`` and every later turn with an error, so no fresh turn is ever asked from a
state that is not the recorded one (the runtime stops the run's calls too,
`runner.runtime.replay.calls.Caller`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.providers.apis import ApiCall
from runner.providers.base import ModelProvider, ProviderResponse, error_response
from runner.providers.replay import ROLES, ReplayProvider

__all__ = ["ForkProvider"]

_DIVERGED = ("ReplayDivergence", "ReplayRefused")


class ForkProvider:
    """Serves an anchored fork's turns: recorded prefix turns, then fresh ones.

    Args:
        prefix: the prefix's ``call`` records (index below K), in order.
        fresh: the new workflow's provider, or None when it has no model (a fresh turn is
            then an error, as for any run without a model).
    """

    name = "fork"

    def __init__(self, prefix: Sequence[Mapping[str, Any]], fresh: ModelProvider | None) -> None:
        self._replay = ReplayProvider(prefix)
        self._fresh = fresh
        self._left = {role: sum(1 for c in prefix if c.get("tool") == role) for role in ROLES}
        self.diverged: str | None = None

    def _take(self, role: str) -> bool:
        """True when the next ``role`` turn is a prefix turn (and count it)."""
        if self._left.get(role, 0) > 0:
            self._left[role] -= 1
            return True
        return False

    def _replayed(self, response: ProviderResponse) -> ProviderResponse:
        error = response.error or {}
        if error.get("class") in _DIVERGED:
            self.diverged = str(error.get("message", ""))
        return response

    def _stopped(self) -> ProviderResponse:
        return error_response(
            "ReplayDivergence",
            f"the anchored fork does not continue: its prefix diverged ({self.diverged})",
        )

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """A prefix turn from the recording, else a fresh turn (an error once diverged)."""
        if self.diverged is not None:
            return self._stopped()
        if self._take(role):
            return self._replayed(self._replay.complete(request, role))
        if self._fresh is None:
            return error_response("ProviderError", "the workflow configures no model")
        return self._fresh.complete(request, role)

    def forward(self, call: ApiCall) -> ProviderResponse:
        """A program step's gateway request: a prefix turn, else forwarded fresh."""
        if self.diverged is not None:
            return self._stopped()
        if self._take("model"):
            return self._replayed(self._replay.forward(call))
        if self._fresh is None:
            return error_response("ProviderError", "the workflow configures no model")
        return self._fresh.forward(call)

    def close(self) -> None:
        """Close the fresh provider when it holds connections."""
        close = getattr(self._fresh, "close", None)
        if callable(close):
            close()
