"""The host's side of a program step's model gateway: check, route, answer one request.

A ``gateway_request`` comes from the sandbox, so it is hostile input: `parse_request` checks
every field (types, sizes, the API, the path, that ``step_id`` is a program step of the
workflow, the passed headers, the request's nesting) and a bad one is answered with an error,
never forwarded. Outside reproduce, the request must also hold only the fields the gateway
allow-list calls inert, and ask a model that does not search the web by itself
(`runner.providers.allowlist`: no provider-side tools, MCP servers, media or URLs to fetch,
stored state, beta headers); one that does not is refused (`GatewayRequestRefused`, class
``GatewayRequestRefused`` with the field's path as ``param``), and so is a request on an API
whose provider the step's model block does not declare (`runner.domain.stepspec.ModelSpec.
apis`: a program step uses only the keys its workflow names).

The check is here, on the host, because the key is here: the sandbox's gateway runs next to
the code it would judge. ``record`` (a live, unsandboxed run by design, whose tools run for
real) is not held to the allow-list: what production does is what it records.

A good request becomes an `ApiCall` whose body is the program's request with the step's model
name applied (`runner.providers.gateway.model_override`) and the allow-list's forced fields
(`runner.providers.allowlist.FORCED`: Responses ``store: false``); not in reproduce, where
the request is matched as recorded and nothing is forwarded. `reply` builds the
``gateway_response``: the raw body (base64 when it is not UTF-8), the status, the content
type, the model id and usage the host read from the body, and the error of a failed call.

Nothing here forwards anything: the episode's gateway (`runner.episode.gatewayturns`) calls the
run's provider (metered, routed).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from runner.providers.allowlist import FORCED, NotInert, check_model, check_request
from runner.providers.apis import APIS, FAMILY, NAMED_BY_STEP, SERVED_FROM_RUN, ApiCall
from runner.providers.base import ProviderResponse
from runner.providers.gateway import model_override
from runner.providers.retrieval import RESPONSE_ID
from runner.trace.strictjson import MAX_VALUE_DEPTH, depth_of

__all__ = [
    "GatewayRequestError",
    "GatewayRequestRefused",
    "UndeclaredToolsOffered",
    "clean_note",
    "invalid",
    "message_id",
    "parse_request",
    "reply",
    "witnessed_record",
]

MAX_ID_CHARS = 64
MAX_PATH_CHARS = 2048
PASSED_HEADERS = frozenset({"anthropic-version", "anthropic-beta", "openai-beta"})
MAX_HEADER_CHARS = 256


class GatewayRequestError(ValueError):
    """A ``gateway_request`` the host will not forward (the message says which field)."""

    error_class = "GatewayRequestInvalid"
    param: str | None = None


class UndeclaredToolsOffered(GatewayRequestError):
    """A request offering its model tools the program step does not declare (fail closed).

    Attributes:
        names: the undeclared tool names, in order.
    """

    error_class = "runner.errors.CapabilityDenied"

    def __init__(self, step_id: str, names: list[str]) -> None:
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        super().__init__(
            f"step {step_id!r} offers its model tool(s) it does not declare: {shown}; an "
            "undeclared tool is unsafe (fail closed): the request is not forwarded"
        )
        self.param = "tools"
        self.names = names


class GatewayRequestRefused(GatewayRequestError):
    """A well-formed request holding a field the allow-list does not call inert.

    Attributes:
        param: the field's JSON path (``tools[0].type``) or ``header NAME``.
        kind: the allow-list's kind (`runner.providers.allowlist.NotInert.kind`).
    """

    error_class = "GatewayRequestRefused"

    def __init__(self, refused: NotInert) -> None:
        super().__init__(
            f"the sandbox's model gateway does not forward {refused} ({refused.kind}; "
            "sandbox-replay forwards text, function tools and sampling settings only)"
        )
        self.param = refused.param
        self.kind = refused.kind


def _step_spec(workflow: Mapping[str, Any], step_id: str) -> Mapping[str, Any] | None:
    for step in workflow.get("steps") or []:
        if isinstance(step, dict) and step.get("id") == step_id and "program" in step:
            own = step.get("model")
            if isinstance(own, dict):
                return own
            model = workflow.get("model")
            return model if isinstance(model, dict) else None
    raise GatewayRequestError(f"step_id {step_id[:64]!r} is not a program step of the workflow")


# The APIs a program step may call when its model block names none (`ModelSpec.apis`).
DEFAULT_APIS = {
    "openai": ("chat_completions", "responses", "embeddings", "moderations", "responses_retrieve"),
    "anthropic": ("messages", "count_tokens"),
    "scripted": APIS,
}


def _declared(spec: Mapping[str, Any] | None, api: str, step_id: str) -> None:
    """Refuse an API whose provider key the step's model block does not declare (N12).

    A step with no model block at all is left to the router, which answers "no model".
    """
    if spec is None:
        return
    apis = spec.get("apis") or DEFAULT_APIS.get(str(spec.get("provider")), ())
    if api not in apis:
        raise NotInert(
            "api",
            "undeclared_provider",
            f"program step {step_id[:64]!r} may call {', '.join(apis) or 'no model API'} "
            f"(model provider {spec.get('provider')!r}); the {api} API would use the "
            f"{FAMILY[api]} provider's key, which its workflow does not declare (add "
            f"{api} to the model's apis to allow it)",
        )


def parse_request(
    message: Mapping[str, Any], workflow: Mapping[str, Any], *, reproduce: bool, live: bool = False
) -> ApiCall:
    """The `ApiCall` of a ``gateway_request`` message.

    Args:
        message: the message (``id`` already checked).
        workflow: the normalised workflow the run was given (its program steps and models).
        reproduce: the run reproduces a trace (no model override, no allow-list: matched as
            recorded, nothing forwarded).
        live: the run is ``record``'s, live and unsandboxed by design (its tools run for
            real): the allow-list does not apply, the declared APIs do.

    Raises:
        GatewayRequestRefused: the request holds a field that is not inert.
        GatewayRequestError: a field is missing, of the wrong type or out of bounds.
    """
    api, path, request = message.get("api"), message.get("path"), message.get("request")
    step_id, headers = message.get("step_id"), message.get("headers") or {}
    if api not in APIS:
        raise GatewayRequestError(f"api must be one of {', '.join(APIS)}")
    if not isinstance(path, str) or not path.startswith("/") or len(path) > MAX_PATH_CHARS:
        raise GatewayRequestError(f"path must be a string starting with '/' (<= {MAX_PATH_CHARS})")
    if not isinstance(request, dict):
        raise GatewayRequestError("request must be a JSON object")
    if depth_of(request, stop_above=MAX_VALUE_DEPTH) > MAX_VALUE_DEPTH:
        raise GatewayRequestError(f"request is nested deeper than {MAX_VALUE_DEPTH} levels")
    if not isinstance(step_id, str):
        raise GatewayRequestError("step_id must be a string")
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and k in PASSED_HEADERS and isinstance(v, str)
        for k, v in headers.items()
    ):
        raise GatewayRequestError(f"headers may hold only {', '.join(sorted(PASSED_HEADERS))}")
    if api in SERVED_FROM_RUN and (
        set(request) != {"response_id"}
        or not isinstance(request["response_id"], str)
        or not RESPONSE_ID.match(request["response_id"])
    ):
        raise GatewayRequestError("a retrieval's request must be {response_id: an id}")
    spec = _step_spec(workflow, step_id)
    body = dict(request)
    if not reproduce:
        try:
            _declared(spec, str(api), step_id)
            if not live:
                check_request(str(api), request, headers)
        except NotInert as exc:
            raise GatewayRequestRefused(exc) from None
        body.update(FORCED.get(str(api), {}))
    # a retrieval names no model (it is answered from the run's records, never forwarded);
    # embeddings and moderations name a model of another kind than the step's (NAMED_BY_STEP)
    retrieval = api in SERVED_FROM_RUN
    named = not reproduce and api in NAMED_BY_STEP
    name = model_override(spec, FAMILY[str(api)]) if named else None
    if name is not None:
        body["model"] = name
    if not reproduce and not live and not retrieval:
        try:
            check_model(str(api), body.get("model"))
        except NotInert as exc:
            raise GatewayRequestRefused(exc) from None
    return ApiCall(
        api=str(api),
        path=path,
        request=request,
        body=body,
        step_id=step_id,
        headers={k: v[:MAX_HEADER_CHARS] for k, v in headers.items()},
    )


def message_id(message: Mapping[str, Any]) -> str | None:
    """The message's ``id`` when it is a usable one (a short string), else None."""
    value = message.get("id")
    return value if isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS else None


def reply(message_id: str, response: ProviderResponse) -> dict[str, Any]:
    """The ``gateway_response`` for ``response``."""
    out: dict[str, Any] = {
        "type": "gateway_response",
        "id": message_id,
        "status": response.status,
        "model": response.model,
        "usage": dict(response.usage),
    }
    if response.body is not None:
        try:
            out["body"] = response.body.encode("utf-8").decode("utf-8")
        except UnicodeEncodeError:  # undecodable bytes carried by surrogateescape
            out["body"] = base64.b64encode(response.body.encode("utf-8", "surrogateescape")).decode(
                "ascii"
            )
            out["body_encoding"] = "base64"
        out["content_type"] = response.content_type or "application/json"
    else:
        out["body"] = None
    if response.error is not None:
        out["error"] = dict(response.error)
    return out


def invalid(message_id: str, problem: GatewayRequestError) -> dict[str, Any]:
    """The ``gateway_response`` refusing a request the host will not forward.

    ``error`` is ``{class, message, param?}``: the sandbox's gateway answers the program in
    the API's error shape with HTTP 400 and ``param`` the field's path.
    """
    error: dict[str, Any] = {"class": problem.error_class, "message": str(problem)}
    if problem.param is not None:
        error["param"] = problem.param
    return {
        "type": "gateway_response",
        "id": message_id,
        "status": 400,
        "body": None,
        "error": error,
    }


def witnessed_record(
    record: dict[str, Any], served: ProviderResponse, call: ApiCall
) -> dict[str, Any]:
    """A program's model call line as the host witnessed it (after the body and model id).

    The request is the one the gateway received (what reproduce matches), ``api`` the API it
    arrived on, ``http_status`` the status served, ``usage`` what the body stated, and
    ``forwarded`` the body sent to the
    provider when it differs from the request (the step's model name, a token cap).
    """
    record = dict(record)
    record["api"] = call.api
    record["request"] = dict(call.request)
    record["http_status"] = served.status
    if served.usage:
        record["usage"] = dict(served.usage)
    else:
        record.pop("usage", None)
    forwarded = served.forwarded if served.forwarded is not None else call.body
    if dict(forwarded) != dict(call.request):
        record["forwarded"] = dict(forwarded)
    else:
        record.pop("forwarded", None)
    return record


def clean_note(message: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ``gateway_note`` worth keeping: short strings and integers only."""
    note: dict[str, Any] = {}
    for key in ("kind", "method", "path", "bytes", "status"):
        value = message.get(key)
        if isinstance(value, str):
            note[key] = value[:512]
        elif isinstance(value, int) and not isinstance(value, bool):
            note[key] = value
    return note
