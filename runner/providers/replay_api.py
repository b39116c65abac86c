"""Serving a program step's gateway requests from a trace (`ReplayProvider.forward`).

A recorded gateway call (a ``call`` line with ``tool: model`` and an ``api``) is served to the
request that matches it: the same API and the same canonical JSON of the program's request
body (`runner.sdk.canonical_json`: sorted keys, no whitespace). A miss names the first
differing field as a path (``messages[1].content``, ``tools``, ``stream``) with both values;
the runtime records it as the call's error and ``reproduce`` reports ``not_reproduced`` at
that call. The answer is the recorded raw body, byte for byte (a stream's raw events), with
the recorded HTTP status; a recorded refusal without a body is served as its error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.providers.apis import ApiCall
from runner.sdk import canonical_json
from runner.trace.excerpt import cut, differing_excerpts
from runner.trace.format import decode_body

__all__ = ["first_differing_field", "serve_recorded"]

_SHOW = 120


def _short(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    return cut(canonical_json(value), _SHOW)


_MISSING = object()


def first_differing_field(mine: Any, theirs: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place where two JSON values differ, or None when they are equal.

    Object keys are visited in sorted order, list items by position.

    Returns:
        ``(path, mine, theirs)``: the path (``""`` for the root, else ``a.b[2].c``) and the
        values there (the module's missing marker when one side has no such field).
    """
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in sorted(set(mine) | set(theirs)):
            here = f"{path}.{key}" if path else str(key)
            a, b = mine.get(key, _MISSING), theirs.get(key, _MISSING)
            if a is _MISSING or b is _MISSING:
                return here, a, b
            found = first_differing_field(a, b, here)
            if found is not None:
                return found
        return None
    if isinstance(mine, list) and isinstance(theirs, list):
        for index in range(max(len(mine), len(theirs))):
            here = f"{path}[{index}]"
            a = mine[index] if index < len(mine) else _MISSING
            b = theirs[index] if index < len(theirs) else _MISSING
            if a is _MISSING or b is _MISSING:
                return here, a, b
            found = first_differing_field(a, b, here)
            if found is not None:
                return found
        return None
    if canonical_json(mine) != canonical_json(theirs):
        return path, mine, theirs
    return None


def mismatch(call: ApiCall, recorded: Mapping[str, Any]) -> str | None:
    """Why ``recorded`` does not answer ``call`` (None when it does)."""
    recorded_api = recorded.get("api") or "chat_completions (an agent step's turn)"
    if recorded_api != call.api:
        return f"the request is a {call.api} request, the recording a {recorded_api} one"
    recorded_request = recorded.get("request")
    found = first_differing_field(dict(call.request), recorded_request)
    if found is None:
        return None
    path, mine, theirs = found
    if mine is _MISSING or theirs is _MISSING:
        shown = (_short(mine), _short(theirs))
    else:  # both cut around where they differ, never before it
        shown = differing_excerpts(canonical_json(mine), canonical_json(theirs), _SHOW)
    return (
        f"first differing field {path or '(the body)'}: request has {shown[0]}, "
        f"recording has {shown[1]}"
    )


def serve_recorded(call: ApiCall, recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The answer a matching recorded call gives: keyword arguments of a `ProviderResponse`.

    Returns:
        ``{"body", "status", "content_type", "model"?, "usage"?, "error"?}``; a recorded
        error without a body gives ``{"body": None, "error"}``.

    Raises:
        ValueError: the recorded body cannot be decoded.
    """
    error = recorded.get("error")
    raw = decode_body(dict(recorded))
    if raw is None:
        if isinstance(error, Mapping):
            return {
                "body": None,
                "error": {
                    "class": str(error.get("class", "RecordedError")),
                    "message": str(error.get("message", "")),
                },
            }
        raise ValueError("the recorded call has no body")
    status = recorded.get("http_status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else 200
    answer: dict[str, Any] = {
        "body": raw.decode("utf-8", "surrogateescape"),
        "status": status,
        "content_type": "text/event-stream" if call.stream and status < 400 else "application/json",
    }
    if isinstance(recorded.get("model"), str):
        answer["model"] = recorded["model"]
    if isinstance(recorded.get("usage"), dict):
        answer["usage"] = recorded["usage"]
    if isinstance(error, Mapping):
        answer["error"] = {
            "class": str(error.get("class", "RecordedError")),
            "message": str(error.get("message", "")),
        }
    return answer
