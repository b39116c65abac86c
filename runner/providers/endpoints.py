"""A provider's HTTP endpoint on the host: its base URL and key, and the client that calls it.

The ``openai`` and ``anthropic`` providers take their endpoint the same way (`endpoint`): the
host settings' ``{vendor}_base_url`` / ``{vendor}_api_key``, else the host environment's
``{VENDOR}_BASE_URL`` / ``{VENDOR}_API_KEY``, else the vendor's public URL and no key. The key
stays on the host: it is a header of `client`, never part of a request a sandbox sees. The
client ignores the proxy variables of the environment (``trust_env=False``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx
from pydantic import SecretStr

from runner.errors import InputError

__all__ = ["client", "endpoint"]


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
