"""The replay provider: a trace's recorded model and simulated-user turns, served in order.

Turns are matched per role on the canonical JSON of (messages, tools, settings) of the request
(`match_key`); a program step's gateway requests on the API and the canonical JSON of the body
(`runner.providers.replay_api`). A miss is a ``ReplayDivergence`` error turn that names the
first differing message or field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.providers.apis import ApiCall
from runner.providers.base import ProviderResponse, error_response, response_from_body
from runner.providers.replay_api import mismatch, serve_recorded
from runner.sdk import canonical_json
from runner.trace.excerpt import cut, differing_excerpts
from runner.trace.format import decode_body

ROLES = ("model", "user")


def _settings(request: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k not in ("messages", "tools")}


def _short(text: str | None) -> str:
    """One side of a message difference when the other side has no such message."""
    return "no message" if text is None else cut(text)


def _first_difference(request: Mapping[str, Any], recorded: Mapping[str, Any]) -> str:
    mine = request.get("messages") or []
    theirs = recorded.get("messages") or []
    for index in range(max(len(mine), len(theirs))):
        a = canonical_json(mine[index]) if index < len(mine) else None
        b = canonical_json(theirs[index]) if index < len(theirs) else None
        if a != b:
            shown = (_short(a), _short(b))
            if a is not None and b is not None:  # both cut around where they differ
                shown = differing_excerpts(a, b, 120)
            return (
                f"first differing message index {index}: request has "
                f"{shown[0]}, recording has {shown[1]}"
            )
    if canonical_json(request.get("tools")) != canonical_json(recorded.get("tools")):
        return "messages equal; tools differ"
    mine_s, theirs_s = _settings(request), _settings(recorded)
    keys = sorted(k for k in set(mine_s) | set(theirs_s) if mine_s.get(k) != theirs_s.get(k))
    return f"messages and tools equal; settings differ in {', '.join(keys)}"


def match_key(request: Mapping[str, Any]) -> str:
    """Canonical JSON of (messages, tools, settings) of a request: what replay matches on."""
    return canonical_json([request.get("messages") or [], request.get("tools"), _settings(request)])


class ReplayProvider:
    """Serves model and simulated-user turns from recorded ``call`` records, in order per role.

    Args:
        calls: trace ``call`` records; those whose ``tool`` is ``model`` or ``user`` are
            served, each with its ``request`` and raw ``body``.

    """

    name = "replay"

    def __init__(self, calls: Sequence[Mapping[str, Any]]) -> None:
        self._queues: dict[str, list[Mapping[str, Any]]] = {role: [] for role in ROLES}
        for call in calls:
            role = call.get("tool")
            if role in self._queues:
                self._queues[str(role)].append(call)
        self._cursor = dict.fromkeys(ROLES, 0)

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Serve the next recorded turn of ``role`` when it matches; a miss is an error turn."""
        queue = self._queues.get(role)
        if queue is None:
            return error_response("ReplayDivergence", f"no recorded turns for role {role!r}")
        index = self._cursor[role]
        if index >= len(queue):
            used = (
                f"all {len(queue)} recorded {role} turns"
                if len(queue) != 1
                else f"the one recorded {role} turn"
            )
            return error_response(
                "ReplayDivergence", f"unrecorded {role} turn: {used} already used"
            )
        recorded = queue[index]
        recorded_request = recorded.get("request") or {}
        if match_key(request) != match_key(recorded_request):
            detail = _first_difference(request, recorded_request)
            return error_response(
                "ReplayDivergence",
                f"{role} turn {index} (call {recorded.get('index')}) differs from its "
                f"recording: {detail}",
            )
        self._cursor[role] = index + 1
        if recorded.get("error") and recorded.get("body") is None:
            err = recorded["error"]
            return error_response(
                str(err.get("class", "RecordedError")), str(err.get("message", ""))
            )
        try:
            raw = decode_body(dict(recorded))
        except ValueError as exc:
            return error_response("ReplayRefused", f"recorded body unreadable: {exc}")
        if raw is None:
            return error_response("ReplayRefused", f"{role} turn {index} has no recorded body")
        body = raw.decode("utf-8", "surrogateescape")
        response = response_from_body(body)
        if response.model is None and isinstance(recorded.get("model"), str):
            response = ProviderResponse(body=body, model=recorded["model"], usage=response.usage)
        return response

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Serve the next recorded model call to a program's gateway request when it matches.

        Matched on the API and the canonical JSON of the program's request body
        (`runner.providers.replay_api`); a miss names the first differing field.
        """
        queue = self._queues["model"]
        index = self._cursor["model"]
        if index >= len(queue):
            return error_response(
                "ReplayDivergence",
                f"unrecorded model call ({call.api}): all {len(queue)} recorded model turns "
                "already used",
            )
        recorded = queue[index]
        why = mismatch(call, recorded)
        if why is not None:
            return error_response(
                "ReplayDivergence",
                f"model turn {index} (call {recorded.get('index')}) differs from its "
                f"recording: {why}",
            )
        self._cursor["model"] = index + 1
        try:
            return ProviderResponse(**serve_recorded(call, recorded))
        except ValueError as exc:
            return error_response(
                "ReplayRefused", f"model turn {index}: recorded body unreadable: {exc}"
            )
