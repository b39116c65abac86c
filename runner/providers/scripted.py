"""The scripted provider: the user's deterministic ``module:function`` run on the host.

The function is imported by `runner.domain.userfunction.load_function`, the one host-side
importer of a user's ``module:function`` reference.

One calling convention, for agent steps and program steps alike (`ScriptedProvider`)::

    def respond(request: dict, *, api: str, path: str, role: str) -> str | dict

``request`` is the request body as the API received it (an agent step's turn: the Chat
Completions request); ``api`` (`runner.providers.apis.APIS`), ``path`` and ``role``
(``model`` or ``user``, the simulated user) are passed as keyword arguments when the function
declares them (or ``**kwargs``), so ``def respond(request)`` is the whole convention for a
model that speaks Chat Completions to agent steps. It returns the raw response body: a string
(for ``stream: true`` the API's event stream), or a dict written with `json.dumps`.

Deprecated, still served (`ENVELOPE_DEPRECATED`: a `DeprecationWarning` and a log warning,
once per function): for a program step, a function that declares no ``api`` parameter is
called as before with one envelope ``{"api", "path", "body"}`` and the body as ``body``. Why
this way round: an agent step's functions, the most common ones, need no change; a program
step's function that reads ``payload["body"]`` keeps working and is told what to change
(declare ``api``); and one function can now answer both kinds of steps of one workflow. A
function that declares no ``role`` still finds a simulated user's turn marked as
``request["role"] == "user"``.
"""

from __future__ import annotations

import inspect
import json
import warnings
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

__all__ = ["ENVELOPE_DEPRECATED", "ScriptedProvider", "keywords_of"]

_KEYWORDS = ("api", "path", "role")
ENVELOPE_DEPRECATED = (
    "scripted model {name}: a program step's request reaches it as one {{api, path, body}} "
    "envelope, a deprecated calling convention; declare keyword parameters "
    "`def {short}(request, *, api, path)` to receive the request body itself"
)


def keywords_of(function: Callable[..., Any]) -> frozenset[str]:
    """The convention's keywords (``api``, ``path``, ``role``) that ``function`` declares.

    All of them for a function taking ``**kwargs``; none when its signature cannot be read.
    """
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return frozenset(_KEYWORDS)
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters[1:] if p.name in _KEYWORDS and p.kind in named)


def _as_body(result: Any) -> str | ProviderResponse:
    """The raw body a function returned (a str, or a dict as JSON), or the error answer."""
    if isinstance(result, dict):
        try:
            return json.dumps(result, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:  # also nested too deeply
            return error_response("ProviderError", f"scripted response is not JSON: {exc}")
    if isinstance(result, bytes):
        return result.decode("utf-8", "surrogateescape")
    if isinstance(result, str):
        return result
    return error_response(
        "ProviderError",
        f"scripted function returned {type(result).__name__}, not the raw body (str) or a dict",
    )


class ScriptedProvider:
    """A deterministic function run on the host, called by the one convention above.

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
        self.keywords = keywords_of(self.function)
        self._warned = False

    def _call(self, request: dict[str, Any], **fields: str) -> Any:
        """Call the function with ``request`` and the keywords it declares."""
        return self.function(request, **{k: v for k, v in fields.items() if k in self.keywords})

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """An agent step's Chat Completions turn; an exception or a bad result is an error turn."""
        payload = dict(request)
        if role != "model" and "role" not in self.keywords:
            payload["role"] = role
        try:
            result = self._call(
                payload, api="chat_completions", path="/v1/chat/completions", role=role
            )
        except Exception as exc:
            log.info("scripted_provider_raised", error_class=type(exc).__qualname__)
            return error_response(type(exc).__qualname__, str(exc))
        body = _as_body(result)
        return body if isinstance(body, ProviderResponse) else response_from_body(body)

    def _envelope(self, call: ApiCall) -> Any:
        """The deprecated program-step convention: one ``{api, path, body}`` argument."""
        if not self._warned:
            self._warned = True
            name = getattr(self.function, "__qualname__", repr(self.function))
            message = ENVELOPE_DEPRECATED.format(name=name, short=name.rsplit(".", 1)[-1])
            warnings.warn(message, DeprecationWarning, stacklevel=3)
            log.warning("scripted_envelope_deprecated", function=name[:200])
        return self.function({"api": call.api, "path": call.path, "body": dict(call.body)})

    def forward(self, call: ApiCall) -> ProviderResponse:
        """A program step's request: the body and its ``api``/``path``; returns the raw body.

        A function that declares no ``api`` gets the deprecated envelope (module docstring).
        """
        try:
            if "api" in self.keywords:
                result = self._call(dict(call.body), api=call.api, path=call.path, role="model")
            else:
                result = self._envelope(call)
        except Exception as exc:
            log.info("scripted_provider_raised", error_class=type(exc).__qualname__)
            return error_response(type(exc).__qualname__, str(exc))
        body = _as_body(result)
        return body if isinstance(body, ProviderResponse) else response_from_api(call, body)
