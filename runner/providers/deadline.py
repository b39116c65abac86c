"""The episode's deadline around a provider: a hanging model call cannot hold a run past it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from runner.providers.apis import ApiCall
from runner.providers.base import ModelProvider, ProviderResponse


def _timeout_response() -> ProviderResponse:
    return ProviderResponse(
        body=None,
        error={
            "class": "ProviderTimeout",
            "message": "the episode deadline passed before the model provider answered",
        },
    )


class DeadlineProvider:
    """Wraps a provider so that a hanging model function cannot hold an episode past its deadline.

    The call runs on a daemon worker thread; when ``remaining_s()`` seconds pass first, the turn
    is answered with a ``ProviderTimeout`` error and the thread is abandoned (the driver then
    kills the sandbox: status ``timeout``). Exceptions of the inner call are re-raised here.

    Args:
        inner: the provider.
        remaining_s: seconds left until the episode's deadline.
        on_timeout: called when a turn ran into the deadline.
    """

    def __init__(
        self,
        inner: ModelProvider,
        remaining_s: Callable[[], float],
        on_timeout: Callable[[], None] = lambda: None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.remaining_s = remaining_s
        self.on_timeout = on_timeout

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Answer through the inner provider, or with an error turn once the deadline passed.

        A request that arrives after the deadline is refused without calling the inner
        provider: a sandbox that queued many requests before being killed must not start a
        (paid) model call for each of them.
        """
        if self.remaining_s() <= 0:
            self.on_timeout()
            return _timeout_response()
        return self._within_deadline(lambda: self.inner.complete(request, role))

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Forward a gateway request through the inner provider, within the deadline."""
        if self.remaining_s() <= 0:
            self.on_timeout()
            return _timeout_response()
        return self._within_deadline(lambda: self.inner.forward(call))

    def _within_deadline(self, answer: Callable[[], ProviderResponse]) -> ProviderResponse:
        box: list[ProviderResponse | BaseException] = []

        def work() -> None:
            try:
                box.append(answer())
            except BaseException as exc:  # handed to the driver's thread below
                box.append(exc)

        worker = threading.Thread(target=work, name="model-provider", daemon=True)
        worker.start()
        # the deadline may move while the call waits (rate-limit waits do not count against
        # the run's timeout): wait again for as long as it has moved
        worker.join(max(self.remaining_s(), 0.0))
        while not box and worker.is_alive() and self.remaining_s() > 0:
            worker.join(self.remaining_s())
        if not box:
            self.on_timeout()
            return _timeout_response()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]
