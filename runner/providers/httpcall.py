"""A provider's HTTP endpoint on the host and one model API POST to it.

Shared by the ``openai`` and ``anthropic`` providers' gateway path (`post_api`). The response
body is read as bytes up to `MAX_RESPONSE_BYTES` (a stream is read to its end: the host
records the whole raw event stream and hands it to the sandbox in one message), decoded as
UTF-8 with ``surrogateescape`` so that it round-trips. Transient failures (connection errors
before the request left, HTTP 408, 409, 429 and 5xx) are retried (tenacity,
`runner.providers.retries.provider_retrying`: a 429's ``Retry-After`` honoured, else
exponential backoff), at most
``attempts`` tries, each logged; a POST that may have reached the server (a read timeout, a
connection lost mid-answer) is not retried: its answer says ``maybe_billed`` and the metered
provider charges it at its reservation.

The ``openai`` and ``anthropic`` providers take their endpoint the same way (`endpoint`): the
host settings' ``{vendor}_base_url`` / ``{vendor}_api_key``, else the host environment's
``{VENDOR}_BASE_URL`` / ``{VENDOR}_API_KEY``, else the vendor's public URL and no key. The key
stays on the host: it is a header of `client`, never part of a request a sandbox sees. The
client ignores the proxy variables of the environment (``trust_env=False``).

What a failure tells the sandbox: an error message names the provider
(``openai``), never its URL (a base URL may carry credentials, ``https://user:pass@host``); a
provider's error body (HTTP 4xx/5xx: a 401 may echo the key) is redacted as recorded bodies
are (`runner.trace.redact`: the built-in detectors, plus the endpoint's own key and URL
credentials, known here). `Scrubber` does both; the host's own log lines keep the endpoint
without its credentials (`Scrubber.endpoint`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx
from pydantic import SecretStr

from runner.errors import InputError
from runner.hostlog import get_logger
from runner.providers import retries
from runner.providers.apis import ApiCall
from runner.providers.base import ProviderResponse, error_response, response_from_api
from runner.providers.ratelimit import RATE_LIMITED_ERROR_CLASS, WaitRefused
from runner.providers.retries import provider_retrying, retry_after_s
from runner.trace.redact import Redactor
from runner.trace.redact_rules import parse_rules

log = get_logger(__name__)

__all__ = [
    "MAX_RESPONSE_BYTES",
    "TRANSIENT_STATUSES",
    "Scrubber",
    "client",
    "endpoint",
    "post_api",
]

# The HTTP statuses worth another try, the one list of every provider (openai, anthropic, the
# gateway's forwards): timeout, conflict, rate limit, the server's and the gateways' errors.
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


class Scrubber:
    """Takes an endpoint's URL and secrets out of what a sandbox or a trace is told.

    Args:
        provider: the provider's name (``openai``, ``anthropic``): what messages say instead.
        base_url: the endpoint's base URL (it may hold ``user:password@``).
        key: the endpoint's key, or None.

    Attributes:
        endpoint: the base URL without its credentials (for the host's own logs).
    """

    def __init__(self, provider: str, base_url: str, key: str | None) -> None:
        self.provider = provider
        parts = urlsplit(base_url)
        netloc = parts.netloc.rpartition("@")[2]
        self.endpoint = urlunsplit(parts._replace(netloc=netloc))
        userinfo = parts.netloc.rpartition("@")[0]
        secrets = {key or "", userinfo, unquote(userinfo)}
        secrets |= {unquote(piece) for piece in userinfo.split(":")}
        secrets = {s for s in secrets if len(s) >= 4}
        # the URL in every spelling a message may carry, longest first
        urls = {base_url, base_url.rstrip("/"), self.endpoint, self.endpoint.rstrip("/"), netloc}
        self._urls = re.compile("|".join(re.escape(u) for u in sorted(urls, key=len, reverse=True)))
        patterns = [
            {"name": "provider_secret", "regex": re.escape(s)}
            for s in sorted(secrets, key=len, reverse=True)
        ]
        self._rules = parse_rules({"patterns": patterns})

    def text(self, text: str) -> str:
        """``text`` with the endpoint's URL named by the provider and its secrets redacted."""
        return self.body(self._urls.sub(f"<{self.provider} endpoint>", text))

    def body(self, body: str) -> str:
        """A provider's error body redacted as a recorded body is (a fresh key each time)."""
        redacted = Redactor(self._rules).redact({"body": body})["body"]
        return redacted if isinstance(redacted, str) else body


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
    scrub: Scrubber,
) -> ProviderResponse:
    """POST ``call.body`` to ``url``; the raw answer as a `ProviderResponse`.

    Args:
        client: the provider's client (its headers carry the key).
        url: the endpoint.
        call: the gateway call (its body is sent as JSON).
        attempts: tries at most for transient failures.
        headers: extra request headers (version headers of the program's request).
        scrub: the endpoint's `Scrubber`: messages name the provider, never the URL, and an
            error body is redacted.

    Returns:
        The answer; an HTTP error status is an answer too (the API's own error body, redacted,
        with ``error.class`` ``ProviderHTTPError``), a transport failure after every try is an
        error with no body (``ProviderUnavailable``). Never raises for a bad call.
    """
    who = scrub.provider
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
            if retries.may_have_reached(exc):  # not retried: a second try may be billed again
                raise retries.MaybeBilled(f"{type(exc).__name__}: {exc}") from exc
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        if status in TRANSIENT_STATUSES:
            raise _Transient(f"HTTP {status}", status, _decode(body), after)
        return status, body, content_type

    retryer = provider_retrying(_Transient, attempts, event="model_api_retry", provider=who)
    forwarded = dict(call.body)
    try:
        status, raw, content_type = retryer(once)
    except retries.MaybeBilled as exc:  # charged at its reservation, not retried
        log.warning("model_api_maybe_billed", provider=who, error=str(exc))
        return error_response(
            "ProviderUnavailable",
            f"{who}: {exc} (not tried again: the request may have reached the provider)",
            forwarded=dict(call.body),
            maybe_billed=True,
        )
    except WaitRefused as exc:  # a 429's Retry-After is longer than the episode may wait
        message = scrub.text(f"{who}: {exc}")
        return error_response(RATE_LIMITED_ERROR_CLASS, message, forwarded=forwarded)
    except _TooLarge as exc:
        return error_response("ProviderError", f"{who}: {exc}", forwarded=forwarded)
    except _Transient as exc:
        if exc.status is not None:  # the provider's own answer after every try: pass it on
            log.warning("model_api_failed", provider=who, status=exc.status, attempts=attempts)
            body = scrub.body(exc.body)
            response = response_from_api(call, body, status=exc.status)
            return with_http_error(response, who, exc.status, body)
        message = scrub.text(f"{who}: {exc} (after {attempts} tries)")
        log.warning("model_api_unavailable", provider=who, endpoint=scrub.endpoint, error=message)
        return error_response("ProviderUnavailable", message, forwarded=forwarded)
    body = _decode(raw)
    if status >= 400:
        body = scrub.body(body)
    response = response_from_api(call, body, status=status, content_type=content_type)
    if status >= 400:
        log.warning("model_api_rejected", provider=who, status=status)
        return with_http_error(response, who, status, body)
    log.debug("model_api_done", provider=who, model=response.model, status=status)
    return response


def with_http_error(
    response: ProviderResponse, who: str, status: int, body: str
) -> ProviderResponse:
    """``response`` marked failed: ``ProviderHTTPError`` naming ``who`` and the (redacted) body.

    Args:
        response: the answer (its body already redacted by the endpoint's `Scrubber`).
        who: the provider's name.
        status: the HTTP status.
        body: the redacted body (its first 500 characters go into the message).
    """
    return replace(
        response,
        error={
            "class": "ProviderHTTPError",
            "message": f"{who}: HTTP {status}: {body[:_ERROR_TEXT_LIMIT]}",
        },
    )


def endpoint(
    base_url: str | None,
    api_key: SecretStr | None,
    *,
    env_prefix: str,
    default_base_url: str,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, str | None]:
    """The base URL and key of an endpoint: the settings', else the environment's.

    Args:
        base_url: the settings' base URL, or None.
        api_key: the settings' key, or None.
        env_prefix: ``OPENAI`` or ``ANTHROPIC``: the environment variables read are
            ``{env_prefix}_BASE_URL`` and ``{env_prefix}_API_KEY``.
        default_base_url: the URL when neither names one.
        environ: the environment to read (default ``os.environ``, read now).

    Returns:
        ``(base_url, key)``; the key is None when neither holds one.
    """
    env = os.environ if environ is None else environ
    url = base_url or env.get(f"{env_prefix}_BASE_URL", default_base_url)
    key = api_key.get_secret_value() if api_key is not None else env.get(f"{env_prefix}_API_KEY")
    return url, key


def client(
    base_url: str,
    headers: Mapping[str, str],
    *,
    field: str,
    attempts: int,
    timeout_s: float,
    transport: httpx.BaseTransport | None,
) -> tuple[str, httpx.Client]:
    """Check an endpoint's settings and make its HTTP client.

    Args:
        base_url: the API root (http or https).
        headers: headers of every request (content type, the key's header).
        field: the settings field named when ``base_url`` is not http(s).
        attempts: tries at most per request (checked here: >= 1).
        timeout_s: per-request timeout in seconds (connect, read, write, pool).
        transport: an httpx transport (tests); None for the real network stack.

    Returns:
        ``(base_url without a trailing slash, client)``.

    Raises:
        InputError: a base URL that is not http(s), or ``attempts`` < 1.
    """
    if not base_url.startswith(("http://", "https://")):
        raise InputError(f"{base_url!r} is not an http(s) URL", field=field)
    if attempts < 1:
        raise InputError("must be >= 1", field="attempts")
    # one call in flight per running sandbox at most, so the submission's concurrency bounds
    # the connections; httpx's default pool (100, 20 kept alive) would queue calls above 100
    # sandboxes and reconnect (TLS again) above 20
    made = httpx.Client(
        headers=dict(headers),
        timeout=timeout_s,
        transport=transport,
        trust_env=False,
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
    )
    return base_url.rstrip("/"), made
