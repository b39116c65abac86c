"""``GET /v1/responses/{id}``: a response the same run received earlier, never fetched live.

An agent on the OpenAI Responses API may retrieve a response it created (``client.responses.
retrieve(id)``: background polling, or re-reading an answer). The gateway forwards every
Responses request with ``store: false`` (`runner.providers.allowlist.FORCED`), so the provider
keeps nothing to retrieve, and a live retrieval would read the account's stored state besides
(refused for the same reason ``previous_response_id`` is). So the host answers it from the run's
own records: `RunResponses` keeps, per episode, every Responses answer the run received (a
plain body as its exact text; a stream as the ``response`` object of its final
``response.completed``, ``response.incomplete`` or ``response.failed`` event, JSON-encoded),
by the response's ``id``. A retrieval of an id the run never received is answered 404 in the
API's error shape, as OpenAI answers an unknown id.

In ``reproduce`` the retrieval is served from its recorded call like any model call
(`runner.providers.replay`): the trace holds the answer the program read; nothing is fetched.

A retrieval is no model call for budgets: nothing is forwarded, nothing charged.

Bounds: at most `MAX_KEPT` responses and `MAX_KEPT_BYTES` of body text per run; past them an
answer is not kept, and retrieving it says so (404).
"""

from __future__ import annotations

import json
import re
from typing import Any

from runner.providers.apis import ApiCall, sse_events
from runner.providers.base import ProviderResponse

__all__ = ["MAX_KEPT", "MAX_KEPT_BYTES", "RESPONSE_ID", "RunResponses", "kept_answer"]

MAX_KEPT = 1000
MAX_KEPT_BYTES = 64 * 1024 * 1024
# What an OpenAI response id looks like (``resp_`` + hex in practice); the gateway refuses
# other path segments before they reach the host.
RESPONSE_ID = re.compile(r"[A-Za-z0-9_-]{1,256}\Z")
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def kept_answer(body: str, stream: bool) -> tuple[str, str] | None:
    """``(response id, the JSON text a retrieval answers)`` of one Responses answer, or None.

    Args:
        body: the raw body the run received (an event stream when ``stream``).
        stream: the request asked for a stream.

    Returns:
        None when the body names no response id (an error body, a cut stream).
    """
    if not stream:
        found = _object(body)
        if found is None or found.get("object") != "response":
            return None
        text = body
    else:
        final: dict[str, Any] | None = None
        for _, data in sse_events(body):
            event = _object(data)
            if event is not None and event.get("type") in _FINAL_EVENTS:
                response = event.get("response")
                final = response if isinstance(response, dict) else final
        if final is None:
            return None
        found, text = final, json.dumps(final, ensure_ascii=False)
    response_id = found.get("id")
    if not isinstance(response_id, str) or not RESPONSE_ID.match(response_id):
        return None
    return response_id, text


class RunResponses:
    """The Responses answers of one run, by id (see the module docstring).

    Not thread-safe: the episode state handles one channel message at a time (its gateway,
    `runner.episode.gatewayturns`, holds one of these).
    """

    def __init__(self) -> None:
        self._kept: dict[str, tuple[str, str | None]] = {}
        self._bytes = 0
        self.dropped = 0

    def remember(self, call: ApiCall, served: ProviderResponse) -> None:
        """Keep ``served`` when it answers a Responses request with a response object."""
        if call.api != "responses" or served.body is None or served.status >= 400:
            return
        found = kept_answer(served.body, call.stream)
        if found is None:
            return
        response_id, text = found
        size = len(text.encode("utf-8", "surrogateescape"))
        if len(self._kept) >= MAX_KEPT or self._bytes + size > MAX_KEPT_BYTES:
            self.dropped += 1
            return
        self._kept[response_id] = (text, served.model)
        self._bytes += size

    def answer(self, call: ApiCall) -> ProviderResponse:
        """The answer to a ``responses_retrieve`` call (its request ``{"response_id"}``).

        Returns:
            The kept response as JSON (HTTP 200, no usage: nothing is charged), or HTTP 404
            with OpenAI's error body and ``error`` class ``ResponseNotFound`` naming the id.
        """
        response_id = call.request.get("response_id")
        kept = self._kept.get(response_id) if isinstance(response_id, str) else None
        if kept is None:
            shown = str(response_id)[:64]
            why = (
                f"; {self.dropped} answer(s) of this run were past the "
                f"{MAX_KEPT}-response / {MAX_KEPT_BYTES // 2**20} MB bound and not kept"
                if self.dropped
                else ""
            )
            message = (
                f"Response with id '{shown}' not found: the sandbox's gateway retrieves only "
                f"responses this run received (nothing is fetched from the provider){why}"
            )
            # the API's own error body, as a provider's 404 is recorded (and replayed)
            body = {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            }
            return ProviderResponse(
                body=json.dumps(body),
                status=404,
                error={"class": "ResponseNotFound", "message": message},
                content_type="application/json",
            )
        text, model = kept
        return ProviderResponse(body=text, model=model, content_type="application/json")
