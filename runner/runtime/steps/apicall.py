"""One model request of a program step: over the channel to the host, recorded as a call.

Standard library only, Python 3.9+. The gateway (`runner.runtime.steps.gateway`) hands each request
it accepted to `call_api`, which takes the next call index (`runner.runtime.replay.calls.Caller`),
sends ``gateway_request`` ``{id, index, step_id, api, path, request, headers}`` and waits for
the host's ``gateway_response`` ``{id, status, body, body_encoding?, content_type, model,
usage, error?, source?}``. The call record (``tool: model``) keeps the program's ``request``
(what ``reproduce`` matches) and the ``api``; the host replaces the body, the model id and the
forwarded request with what it witnessed (`runner.episode.state`).
"""

import time
from typing import Any, Dict, Optional

from runner.runtime.replay.callrecords import raw_body
from runner.runtime.replay.calls import Caller
from runner.trace.format import TRACE_VERSION, encode_body
from runner.wire.errors import ModelCallError


def call_api(
    caller: Caller,
    step_id: str,
    api: str,
    path: str,
    request: Dict[str, Any],
    headers: Optional[Dict[str, str]] = None,
) -> Dict[str, Any]:
    """Ask the host for one model request of a program step and record it.

    Args:
        caller: the episode's caller (its ``request_api`` talks to the host).
        step_id: the program step.
        api: `runner.runtime.steps.gateway.ROUTES` names it (``chat_completions``, ``responses``,
            ``messages``, ``embeddings``, ``moderations``, ``count_tokens``), or
            ``responses_retrieve``.
        path: the path the program sent the request to.
        request: the program's request body (a JSON object).
        headers: version headers passed on to the provider (lower-case names).

    Returns:
        The host's ``gateway_response`` (``status``, ``body``, ``body_encoding``,
        ``content_type``, ``error``), whatever it says: the gateway turns it into the HTTP
        answer the program reads. A failed call is recorded with its ``error``, never raised.
    """
    index, reading = caller._next()
    record: Dict[str, Any] = {
        "v": TRACE_VERSION,
        "type": "call",
        "index": index,
        "step_id": step_id,
        "tool": "model",
        "api": api,
        "request": request,
        "clock": reading,
    }
    started = time.monotonic()
    error: Optional[BaseException] = None
    response: Dict[str, Any] = {}
    try:
        if caller.request_api is None:
            raise ModelCallError("this runtime has no channel for model requests")
        response = caller.request_api(
            {
                "index": index,
                "step_id": step_id,
                "api": api,
                "path": path,
                "request": request,
                "headers": dict(headers or {}),
            }
        )
        record["source"] = str(response.get("source") or "provider")
        raw = raw_body(response)
        if raw is not None:
            record.update(encode_body(raw))
        for key in ("model", "usage"):
            if response.get(key) is not None:
                record[key] = response[key]
        if isinstance(response.get("status"), int):
            record["http_status"] = response["status"]
        remote = response.get("error")
        if remote:
            remote = remote if isinstance(remote, dict) else {"message": str(remote)}
            error = ModelCallError(
                "model request failed on the host: {}".format(remote.get("message", "")),
                remote_class=remote.get("class"),
            )
    except Exception as exc:  # the channel failed: the program gets a 502
        error = exc
        response = {"status": 502, "error": {"class": type(exc).__name__, "message": str(exc)}}
    caller._finish(record, started, error)
    return response
