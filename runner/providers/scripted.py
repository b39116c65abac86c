"""The scripted provider: the user's deterministic ``module:function`` run on the host.

The function is imported by `runner.domain.userfunction.load_function`, the one host-side
importer of a user's ``module:function`` reference.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.domain.userfunction import load_function
from runner.hostlog import get_logger
from runner.providers.apis import ApiCall
from runner.providers.base import (
    ProviderResponse,
    error_response,
    response_from_api,
    response_from_body,
)

log = get_logger(__name__)


class ScriptedProvider:
    """A deterministic ``request -> response dict`` function run on the host.

    The function receives the request (the Chat Completions request dict; for the simulated
    user, ``role`` is added as ``request["role"] == "user"`` only when it is not ``model``) and
    returns a Chat Completions response dict. The dict is serialised with `json.dumps` (key
    order kept, non-ASCII kept) into the raw body.

    Args:
        function: the callable, or a ``module:func`` reference resolved by `load_function`.
        search_paths: folders put first on sys.path while importing (the workflow's folder
            and the current directory).

    Raises:
        InputError: the reference does not resolve (see `load_function`).

    """

    name = "scripted"

    def __init__(
        self, function: str | Callable[..., Any], search_paths: Sequence[Path] = ()
    ) -> None:
        self.function = (
            load_function(function, search_paths) if isinstance(function, str) else function
        )

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Call the function; its exception or a non-dict result becomes an error turn."""
        payload = dict(request)
        if role != "model":
            payload["role"] = role
        try:
            result = self.function(payload)
        except Exception as exc:
            log.info("scripted_provider_raised", error_class=type(exc).__qualname__)
            return error_response(type(exc).__qualname__, str(exc))
        if not isinstance(result, dict):
            return error_response(
                "ProviderError", f"scripted function returned {type(result).__name__}, not a dict"
            )
        try:
            body = json.dumps(result, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:  # also nested too deeply
            return error_response("ProviderError", f"scripted response is not JSON: {exc}")
        return response_from_body(body)

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Call the function with ``{api, path, body}``; it returns the raw response body.

        The function returns the raw body as text (an event stream for ``stream: true``) or a
        dict (serialised with `json.dumps`); anything else, or an exception, is an error.
        """
        payload = {"api": call.api, "path": call.path, "body": dict(call.body)}
        try:
            result = self.function(payload)
        except Exception as exc:
            log.info("scripted_provider_raised", error_class=type(exc).__qualname__)
            return error_response(type(exc).__qualname__, str(exc))
        if isinstance(result, dict):
            try:
                result = json.dumps(result, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                return error_response("ProviderError", f"scripted response is not JSON: {exc}")
        if isinstance(result, bytes):
            result = result.decode("utf-8", "surrogateescape")
        if not isinstance(result, str):
            return error_response(
                "ProviderError",
                f"scripted function returned {type(result).__name__}, not the raw body "
                "(str) or a dict",
            )
        return response_from_api(call, result)
