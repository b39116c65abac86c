"""One model API POST from the host: retries on transient failures, a bounded raw body.

Shared by the ``openai`` and ``anthropic`` providers' gateway path (`post_api`). The response
body is read as bytes up to `MAX_RESPONSE_BYTES` (a stream is read to its end: the host
records the whole raw event stream and hands it to the sandbox in one message), decoded as
UTF-8 with ``surrogateescape`` so that it round-trips. Transient failures (connection errors,
timeouts, HTTP 408, 409, 429 and 5xx) are retried (tenacity, `runner.providers.retries.
provider_retrying`: a 429's ``Retry-After`` honoured, else exponential backoff), at most
``attempts`` tries, each logged; a POST that reached the server may be billed twice by a retry
after a read timeout, which is why the tries are few.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import httpx
import structlog

from runner.providers.apis import ApiCall
from runner.providers.base import ProviderResponse, error_response, response_from_api
from runner.providers.ratelimit import RATE_LIMITED_ERROR_CLASS, WaitRefused
from runner.providers.retries import provider_retrying, retry_after_s

log = structlog.get_logger(__name__)

__all__ = ["MAX_RESPONSE_BYTES", "TRANSIENT_STATUSES", "post_api"]

TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
_ERROR_TEXT_LIMIT = 500


class _Transient(Exception):
    def __init__(
        self,
        message: str,
        status: int | None = None,
        body: str = "",
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.retry_after_s = retry_after_s


class _TooLarge(Exception):
    pass


def _decode(content: bytes) -> str:
    return content.decode("utf-8", "surrogateescape")


def _read(response: httpx.Response) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():  # content encodings (gzip) undone, as for a client
        data += chunk
        if len(data) > MAX_RESPONSE_BYTES:
            raise _TooLarge(f"the response passed {MAX_RESPONSE_BYTES} bytes")
    return bytes(data)


def post_api(
    client: httpx.Client,
    url: str,
    call: ApiCall,
    *,
    attempts: int,
    headers: Mapping[str, str] | None = None,
    who: str,
) -> ProviderResponse:
    """POST ``call.body`` to ``url``; the raw answer as a `ProviderResponse`.

    Args:
        client: the provider's client (its headers carry the key).
        url: the endpoint.
        call: the gateway call (its body is sent as JSON).
        attempts: tries at most for transient failures.
        headers: extra request headers (version headers of the program's request).
        who: the provider's name, for logs and messages.

    Returns:
        The answer; an HTTP error status is an answer too (the API's own error body, with
        ``error.class`` ``ProviderHTTPError``), a transport failure after every try is an
        error with no body (``ProviderUnavailable``). Never raises for a bad call.
    """
    extra = dict(headers or {})
    extra["Accept"] = "text/event-stream" if call.stream else "application/json"

    def once() -> tuple[int, bytes, str | None]:
        try:
            with client.stream("POST", url, json=dict(call.body), headers=extra) as response:
                body = _read(response)
                status = response.status_code
                content_type = response.headers.get("content-type")
                after = retry_after_s(response.headers) if status == 429 else None
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        if status in TRANSIENT_STATUSES:
            raise _Transient(f"HTTP {status}", status, _decode(body), after)
        return status, body, content_type

    retryer = provider_retrying(_Transient, attempts, event="model_api_retry", provider=who)
    try:
        status, raw, content_type = retryer(once)
    except WaitRefused as exc:  # a 429's Retry-After is longer than the episode may wait
        return error_response(RATE_LIMITED_ERROR_CLASS, f"{who}: {exc}", forwarded=dict(call.body))
    except _TooLarge as exc:
        return error_response("ProviderError", f"{who}: {exc}", forwarded=dict(call.body))
    except _Transient as exc:
        if exc.status is not None:  # the provider's own answer after every try: pass it on
            log.warning("model_api_failed", provider=who, status=exc.status, attempts=attempts)
            response = response_from_api(call, exc.body, status=exc.status)
            return _with_http_error(response, who, exc.status, exc.body)
        log.warning("model_api_unavailable", provider=who, attempts=attempts, error=str(exc))
        return error_response(
            "ProviderUnavailable",
            f"{who}: {exc} (after {attempts} tries)",
            forwarded=dict(call.body),
        )
    body = _decode(raw)
    response = response_from_api(call, body, status=status, content_type=content_type)
    if status >= 400:
        log.warning("model_api_rejected", provider=who, status=status)
        return _with_http_error(response, who, status, body)
    log.debug("model_api_done", provider=who, model=response.model, status=status)
    return response


def _with_http_error(
    response: ProviderResponse, who: str, status: int, body: str
) -> ProviderResponse:
    return replace(
        response,
        error={
            "class": "ProviderHTTPError",
            "message": f"{who}: HTTP {status}: {body[:_ERROR_TEXT_LIMIT]}",
        },
    )
