"""The ``openai`` model provider: any OpenAI-compatible endpoint, on the host.

Agent steps' turns go to Chat Completions (`OpenAIProvider.complete`); a program step's gateway
requests go to Chat Completions or Responses as they arrived (`OpenAIProvider.forward`,
streams included, `runner.providers.httpcall`).

The sandbox never sees the endpoint, its address or its key: the runtime asks the host for a
turn over the channel, and this provider makes the HTTP call from the host (httpx).

Configuration comes from `runner.settings.Settings` (``openai_base_url``, ``openai_api_key``,
``openai_model``), each falling back to the host's ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and
``OPENAI_MODEL``; the base URL defaults to ``https://api.openai.com/v1``. The environment is read
when a provider is built (`OpenAIProvider.from_settings`), never at import time.

Invariants:
- the body recorded is the HTTP response body, exactly (bytes decoded as UTF-8 with
  ``surrogateescape``, so they round-trip); the model id is read from the body's ``model``;
- transient failures (connection errors before the request left, HTTP 408, 409, 429 and 5xx)
  are retried (tenacity: a 429's ``Retry-After`` honoured and shared with every sandbox through
  `runner.providers.ratelimit`, else exponential backoff), at most ``attempts`` tries, each
  logged; a POST that may have reached the server (a read timeout, a connection lost
  mid-answer) is not retried: it is answered ``ProviderUnavailable`` with ``maybe_billed`` and
  charged at its reservation (`runner.providers.retries.may_have_reached`). Every other
  failure is reported at once as an error turn, never raised out of
  `OpenAIProvider.complete`;
- the key is a `pydantic.SecretStr` until the ``Authorization`` header is built, and is never
  logged; no message names the base URL (it may hold credentials) and an error body is
  redacted before it reaches a sandbox or a trace (`runner.providers.httpcall.Scrubber`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from runner.hostlog import get_logger
from runner.providers import retries
from runner.providers.apis import ENDPOINT, ApiCall
from runner.providers.base import ProviderResponse, error_response, response_from_body, unsupported
from runner.providers.httpcall import (
    TRANSIENT_STATUSES,
    Scrubber,
    client,
    endpoint,
    post_api,
    with_http_error,
)
from runner.providers.ratelimit import RATE_LIMITED_ERROR_CLASS, WaitRefused
from runner.providers.retries import provider_retrying, retry_after_s

if TYPE_CHECKING:
    from runner.settings import Settings

log = get_logger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_ERROR_TEXT_LIMIT = 500


class _Transient(Exception):
    """A failure worth another try (carries the last response, if there was one)."""

    def __init__(self, message: str, response: httpx.Response | None = None) -> None:
        super().__init__(message)
        self.response = response
        self.status = response.status_code if response is not None else None
        self.retry_after_s = (
            retry_after_s(response.headers) if response is not None and self.status == 429 else None
        )


def _decode(content: bytes) -> str:
    return content.decode("utf-8", "surrogateescape")


class OpenAIProvider:
    """Answers Chat Completions requests through an OpenAI-compatible HTTP endpoint.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1``; requests go to
            ``{base_url}/chat/completions``.
        api_key: the bearer token, or None for endpoints without authentication.
        model: the model asked when the request names none (None: the request must name one).
        timeout_s: per-request timeout in seconds (connect, read, write, pool).
        attempts: tries at most for transient failures (>= 1).
        transport: an httpx transport (tests); default the real network stack.

    Raises:
        InputError: a base URL that is not http(s), or ``attempts`` < 1.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        model: str | None = None,
        timeout_s: float = 60.0,
        attempts: int = 4,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url, self._client = client(
            base_url,
            headers,
            field="openai_base_url",
            attempts=attempts,
            timeout_s=timeout_s,
            transport=transport,
        )
        self.model = model
        self.attempts = attempts
        self._scrub = Scrubber(self.name, base_url, api_key)

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None,
        *,
        model: str | None = None,
        environ: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> OpenAIProvider:
        """Build from the host settings, falling back to ``OPENAI_*`` of the host environment.

        Args:
            settings: host settings, or None to use the environment alone.
            model: the model asked when a request names none (wins over the settings').
            environ: the environment to read (default ``os.environ``, read now).
            kwargs: passed to the constructor (``timeout_s``, ``attempts``, ``transport``).

        Raises:
            InputError: a malformed base URL.
        """
        base_url, key = endpoint(
            settings.openai_base_url if settings else None,
            settings.openai_api_key if settings else None,
            env_prefix="OPENAI",
            default_base_url=DEFAULT_BASE_URL,
            environ=environ,
        )
        env = os.environ if environ is None else environ
        chosen = model or (settings.openai_model if settings else None) or env.get("OPENAI_MODEL")
        return cls(base_url, key, model=chosen, **kwargs)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def _post(self, payload: Mapping[str, Any]) -> httpx.Response:
        try:
            response = self._client.post(f"{self.base_url}/chat/completions", json=dict(payload))
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            if retries.may_have_reached(exc):  # not retried: a second try may be billed again
                raise retries.MaybeBilled(f"{type(exc).__name__}: {exc}") from exc
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code in TRANSIENT_STATUSES:
            raise _Transient(f"HTTP {response.status_code}", response)
        return response

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """POST one Chat Completions request; return the raw body, model id and usage.

        Args:
            request: the request in the OpenAI Chat Completions shape; ``model`` defaults to
                the provider's.
            role: ``model`` or ``user`` (a simulated user is asked the same way).

        Returns:
            The response; an HTTP or transport failure is an error turn (``error.class`` is
            ``ProviderHTTPError`` or ``ProviderUnavailable``), never an exception.
        """
        payload = dict(request)
        if not payload.get("model"):
            if self.model is None:
                return error_response("ProviderError", "the request names no model and none is set")
            payload["model"] = self.model
        retryer = provider_retrying(_Transient, self.attempts, event="openai_call_retry")
        try:
            response = retryer(self._post, payload)
        except retries.MaybeBilled as exc:  # charged at its reservation
            log.warning("openai_call_maybe_billed", role=role, error=str(exc))
            return error_response(
                "ProviderUnavailable",
                f"{self.name}: {exc} (not tried again: the request may have reached the provider)",
                maybe_billed=True,
            )
        except WaitRefused as exc:  # a 429's Retry-After is longer than the episode may wait
            return error_response(RATE_LIMITED_ERROR_CLASS, self._scrub.text(f"{self.name}: {exc}"))
        except _Transient as exc:
            detail = str(exc)
            if exc.response is not None:
                detail += ": " + _decode(exc.response.content)[:_ERROR_TEXT_LIMIT]
            message = self._scrub.text(f"{self.name}: {detail} (after {self.attempts} tries)")
            log.warning(
                "openai_call_failed", role=role, endpoint=self._scrub.endpoint, error=message
            )
            return error_response("ProviderUnavailable", message)
        body = _decode(response.content)
        if response.status_code >= 400:
            log.warning("openai_call_rejected", role=role, status=response.status_code)
            failed = ProviderResponse(body=None)
            return with_http_error(failed, self.name, response.status_code, self._scrub.body(body))
        served = response_from_body(body)
        log.debug("openai_call_done", role=role, model=served.model, status=response.status_code)
        return served

    def forward(self, call: ApiCall) -> ProviderResponse:
        """POST a program step's OpenAI request; the raw answer.

        Args:
            call: the gateway call (``api`` ``chat_completions``, ``responses``,
                ``embeddings`` or ``moderations``); a stream is read to its end and recorded
                whole. A ``responses_retrieve`` is never forwarded (it is answered from the
                run's records: `runner.providers.retrieval`) and gets an error here.

        Returns:
            The raw body (or event stream) with the model id and usage read from it; an HTTP
            error is the API's own error body with ``error`` set, a transport failure an
            error with no body. Never raises.
        """
        if call.api not in ("chat_completions", "responses", "embeddings", "moderations"):
            return unsupported(self.name, f"the {call.api} API")
        if not call.body.get("model") and self.model is not None:
            call = call.with_body({**call.body, "model": self.model})
        url = f"{self.base_url}{ENDPOINT[call.api]}"
        # no program header is passed on: ``openai-beta`` switches on features the gateway
        # allow-list refuses (`runner.providers.allowlist`; refused before this, dropped here)
        return post_api(self._client, url, call, attempts=self.attempts, scrub=self._scrub)

    def __call__(self, request: dict[str, Any]) -> ProviderResponse:
        """Answer a ``model`` turn: the ``request -> response`` shape model judges call."""
        return self.complete(request, "model")
