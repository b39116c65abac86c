"""The ``anthropic`` model provider: the Messages API (``POST /v1/messages``), on the host.

Token counting (``POST /v1/messages/count_tokens``) goes the same way (free: never charged,
`runner.providers.apis.FREE`).

It answers a program step's Messages requests (the official ``anthropic`` SDK's calls, which the
sandbox's gateway receives), streams included (``message_start`` ... ``message_stop``, recorded
raw). Agent steps speak Chat Completions and are not served here (a workflow check says so).

Configuration comes from `runner.settings.Settings` (``anthropic_base_url``,
``anthropic_api_key``: ``SANDBOX_REPLAY_ANTHROPIC_API_KEY``), each falling back to the host's
``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``; the base URL defaults to
``https://api.anthropic.com``. Usage (``input_tokens`` with the cache counts, ``output_tokens``)
and USD come from the body and the policy's price table, as for every provider
(`runner.providers.metered`).

Invariants: the key is sent only as the ``x-api-key`` header from the host, is a
`pydantic.SecretStr` until then and is never logged; the body recorded is the HTTP body,
exactly (an error body redacted first, and no message names the base URL:
`runner.providers.httpcall.Scrubber`); a failure is an answer
(`runner.providers.httpcall.post_api`), never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from runner.providers.apis import ENDPOINT, ApiCall
from runner.providers.base import ProviderResponse, unsupported
from runner.providers.httpcall import Scrubber, client, endpoint, post_api

if TYPE_CHECKING:
    from runner.settings import Settings

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_BASE_URL", "AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
# ``anthropic-beta`` is never passed on: betas switch on features the gateway allow-list
# refuses (`runner.providers.allowlist`; refused before this, dropped here)
_PASSED_HEADERS = ("anthropic-version",)


class AnthropicProvider:
    """Answers Messages requests through the Anthropic HTTP API.

    Args:
        base_url: the API root, e.g. ``https://api.anthropic.com``; requests go to
            ``{base_url}/v1/messages``.
        api_key: the key (``x-api-key``), or None for endpoints without authentication.
        timeout_s: per-request timeout in seconds (connect, read, write, pool).
        attempts: tries at most for transient failures (>= 1).
        transport: an httpx transport (tests); default the real network stack.

    Raises:
        InputError: a base URL that is not http(s), or ``attempts`` < 1.
    """

    name = "anthropic"

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        timeout_s: float = 600.0,
        attempts: int = 4,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self.base_url, self._client = client(
            base_url,
            headers,
            field="anthropic_base_url",
            attempts=attempts,
            timeout_s=timeout_s,
            transport=transport,
        )
        self.attempts = attempts
        self._scrub = Scrubber(self.name, base_url, api_key)

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None,
        *,
        environ: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> AnthropicProvider:
        """Build from the host settings, falling back to ``ANTHROPIC_*`` of the environment.

        Args:
            settings: host settings, or None to use the environment alone.
            environ: the environment to read (default ``os.environ``, read now).
            kwargs: passed to the constructor (``timeout_s``, ``attempts``, ``transport``).

        Raises:
            InputError: a malformed base URL.
        """
        base_url, key = endpoint(
            settings.anthropic_base_url if settings else None,
            settings.anthropic_api_key if settings else None,
            env_prefix="ANTHROPIC",
            default_base_url=DEFAULT_BASE_URL,
            environ=environ,
        )
        return cls(base_url, key, **kwargs)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Agent steps' Chat Completions turns are not served by this provider."""
        return unsupported(self.name, "Chat Completions turns of agent steps")

    def forward(self, call: ApiCall) -> ProviderResponse:
        """POST a program step's Messages (or token counting) request; the raw answer.

        A stream is read whole.

        Returns:
            The raw body (or event stream) with the model id and usage read from it; an HTTP
            error is the API's own error body with ``error`` set. Never raises.
        """
        if call.api not in ("messages", "count_tokens"):
            return unsupported(self.name, f"the {call.api} API")
        headers = {k: v for k, v in (call.headers or {}).items() if k in _PASSED_HEADERS}
        url = f"{self.base_url}{ENDPOINT[call.api]}"
        return post_api(
            self._client, url, call, attempts=self.attempts, headers=headers, scrub=self._scrub
        )
