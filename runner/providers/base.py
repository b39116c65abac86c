"""Model providers on the host, in the OpenAI Chat Completions shape (SPEC.md "Model access").

The sandbox asks the host for a model (or simulated-user) turn with a ``model_request``; the host
answers through a `ModelProvider` and meters the call. Providers here:

- `ScriptedProvider`: a deterministic function ``request -> response`` from the user's code
  (``module:func``), imported and run on the host; its returned dict is serialised to the raw
  body;
- `ReplayProvider`: serves turns from a trace's recorded calls, in order per role, matching on
  canonical JSON of (messages, tools, settings); a miss names the first differing message.

Invariants:
- a `ProviderResponse` always carries the exact raw body text, and ``model`` is read from the
  body's ``model`` field, never from configuration (None when the body has none);
- a provider failure is a `ProviderResponse` with ``error`` set (handed to the runtime, which
  raises it in the agent step), never an exception out of `ModelProvider.complete`.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import structlog

from runner.errors import InputError
from runner.providers.apis import ApiCall, summarise
from runner.sdk import canonical_json
from runner.trace.format import decode_body
from runner.trace.strictjson import loads as strict_loads

log = structlog.get_logger(__name__)

ROLES = ("model", "user")


@dataclass(frozen=True)
class ProviderResponse:
    """One answered turn.

    Attributes:
        body: the raw response body, exact text (what the trace records; for a stream the
            raw event stream).
        model: the model id read from the body's ``model`` field, or None.
        usage: ``{"prompt_tokens", "completion_tokens", ...}`` from the body (Responses and
            Messages: ``input_tokens``, ``output_tokens``), or {}.
        error: ``{"class", "message"}`` when the turn failed, else None.
        status: the HTTP status of the answer (program steps' gateway calls; 200 otherwise).
        forwarded: the request body actually sent to the provider (gateway calls), or None.
        content_type: the answer's content type (gateway calls), or None.

    """

    body: str | None
    model: str | None = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    error: Mapping[str, str] | None = None
    status: int = 200
    forwarded: Mapping[str, Any] | None = None
    content_type: str | None = None

    def tokens(self) -> tuple[int, int]:
        """Return ``(tokens_in, tokens_out)`` from ``usage`` (0 when absent or malformed).

        Chat Completions counts ``prompt_tokens``/``completion_tokens``; Responses and
        Messages ``input_tokens``/``output_tokens``, Messages' cache reads and writes
        (``cache_read_input_tokens``, ``cache_creation_input_tokens``) counted as input.
        """

        def count(key: str) -> int:
            value = self.usage.get(key, 0)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        tokens_in = count("prompt_tokens") or (
            count("input_tokens")
            + count("cache_read_input_tokens")
            + count("cache_creation_input_tokens")
        )
        return tokens_in, count("completion_tokens") or count("output_tokens")

    @property
    def has_usage(self) -> bool:
        """True when the body stated its token usage."""
        return bool(self.usage)


class ModelProvider(Protocol):
    """What the episode driver needs of a provider."""

    name: str

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Answer one turn for ``role`` (``model`` or ``user``); never raises for a bad turn."""
        ...

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Answer one gateway request of a program step; never raises for a bad request."""
        ...


def response_from_api(
    call: ApiCall, body: str, *, status: int = 200, content_type: str | None = None
) -> ProviderResponse:
    """A gateway answer from a raw body: model id and usage read from it (`summarise`).

    Args:
        call: the call answered (its API, whether it streams, the body forwarded).
        body: the raw body text (an event stream when the call streams).
        status: the HTTP status.
        content_type: the content type (default: JSON, or ``text/event-stream`` for streams).
    """
    model, usage = summarise(call.api, body, call.stream and status < 400)
    return ProviderResponse(
        body=body,
        model=model,
        usage=usage,
        status=status,
        forwarded=dict(call.body),
        content_type=content_type
        or ("text/event-stream" if call.stream and status < 400 else "application/json"),
    )


def unsupported(provider: str, what: str) -> ProviderResponse:
    """The error answer of a provider asked for something it does not serve."""
    return _error("ProviderError", f"the {provider} provider does not serve {what}")


def response_from_body(body: str) -> ProviderResponse:
    """Build a `ProviderResponse` from a raw body, reading ``model`` and ``usage`` from it.

    A body that is not a JSON object still passes through (the runtime reports it); its
    model is None.
    """
    try:
        parsed = strict_loads(body)  # the one strict decoder: no depth, NaN or duplicate traps
    except ValueError:
        return ProviderResponse(body=body)
    if not isinstance(parsed, dict):
        return ProviderResponse(body=body)
    model = parsed.get("model")
    usage = parsed.get("usage")
    return ProviderResponse(
        body=body,
        model=model if isinstance(model, str) else None,
        usage=usage if isinstance(usage, dict) else {},
    )


def _error(cls: str, message: str) -> ProviderResponse:
    return ProviderResponse(body=None, error={"class": cls, "message": message})


@contextmanager
def _import_path(paths: Sequence[Path]) -> Iterator[None]:
    added = [str(p) for p in paths if str(p) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for entry in added:
            if entry in sys.path:
                sys.path.remove(entry)


def load_function(ref: str, search_paths: Sequence[Path] = ()) -> Callable[..., Any]:
    """Import ``module:func`` (``func`` may be dotted) with ``search_paths`` first on sys.path.

    Raises:
        InputError: a malformed reference, a module that does not import, or a missing or
            non-callable attribute (field ``model.function``).

    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"{ref!r} is not 'module:function'", field="model.function")
    try:
        with _import_path(search_paths):
            target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise InputError(
            f"cannot import {module_name!r}: {exc.__class__.__name__}: {exc}",
            field="model.function",
        ) from None
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise InputError(f"{ref!r}: no attribute {part!r}", field="model.function")
    if not callable(target):
        raise InputError(f"{ref!r} is not callable", field="model.function")
    return target  # type: ignore[no-any-return]


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
            return _error(type(exc).__qualname__, str(exc))
        if not isinstance(result, dict):
            return _error(
                "ProviderError", f"scripted function returned {type(result).__name__}, not a dict"
            )
        try:
            body = json.dumps(result, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:  # also nested too deeply
            return _error("ProviderError", f"scripted response is not JSON: {exc}")
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
            return _error(type(exc).__qualname__, str(exc))
        if isinstance(result, dict):
            try:
                result = json.dumps(result, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                return _error("ProviderError", f"scripted response is not JSON: {exc}")
        if isinstance(result, bytes):
            result = result.decode("utf-8", "surrogateescape")
        if not isinstance(result, str):
            return _error(
                "ProviderError",
                f"scripted function returned {type(result).__name__}, not the raw body "
                "(str) or a dict",
            )
        return response_from_api(call, result)


def _settings(request: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k not in ("messages", "tools")}


def _first_difference(request: Mapping[str, Any], recorded: Mapping[str, Any]) -> str:
    mine = request.get("messages") or []
    theirs = recorded.get("messages") or []
    for index in range(max(len(mine), len(theirs))):
        a = canonical_json(mine[index]) if index < len(mine) else None
        b = canonical_json(theirs[index]) if index < len(theirs) else None
        if a != b:
            return (
                f"first differing message index {index}: request has "
                f"{_short(a)}, recording has {_short(b)}"
            )
    if canonical_json(request.get("tools")) != canonical_json(recorded.get("tools")):
        return "messages equal; tools differ"
    mine_s, theirs_s = _settings(request), _settings(recorded)
    keys = sorted(k for k in set(mine_s) | set(theirs_s) if mine_s.get(k) != theirs_s.get(k))
    return f"messages and tools equal; settings differ in {', '.join(keys)}"


def _short(text: str | None) -> str:
    if text is None:
        return "no message"
    return text if len(text) <= 120 else text[:117] + "..."


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
            return _error("ReplayDivergence", f"no recorded turns for role {role!r}")
        index = self._cursor[role]
        if index >= len(queue):
            return _error(
                "ReplayDivergence",
                f"unrecorded {role} turn: all {len(queue)} recorded {role} turns already used",
            )
        recorded = queue[index]
        recorded_request = recorded.get("request") or {}
        if match_key(request) != match_key(recorded_request):
            detail = _first_difference(request, recorded_request)
            return _error(
                "ReplayDivergence",
                f"{role} turn {index} (call {recorded.get('index')}) differs from its "
                f"recording: {detail}",
            )
        self._cursor[role] = index + 1
        if recorded.get("error") and recorded.get("body") is None:
            err = recorded["error"]
            return _error(str(err.get("class", "RecordedError")), str(err.get("message", "")))
        try:
            raw = decode_body(dict(recorded))
        except ValueError as exc:
            return _error("ReplayRefused", f"recorded body unreadable: {exc}")
        if raw is None:
            return _error("ReplayRefused", f"{role} turn {index} has no recorded body")
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
        from runner.providers.replay_api import mismatch, serve_recorded

        queue = self._queues["model"]
        index = self._cursor["model"]
        if index >= len(queue):
            return _error(
                "ReplayDivergence",
                f"unrecorded model call ({call.api}): all {len(queue)} recorded model turns "
                "already used",
            )
        recorded = queue[index]
        why = mismatch(call, recorded)
        if why is not None:
            return _error(
                "ReplayDivergence",
                f"model turn {index} (call {recorded.get('index')}) differs from its "
                f"recording: {why}",
            )
        self._cursor["model"] = index + 1
        try:
            return ProviderResponse(**serve_recorded(call, recorded))
        except ValueError as exc:
            return _error("ReplayRefused", f"model turn {index}: recorded body unreadable: {exc}")


def _timeout_response() -> ProviderResponse:
    return ProviderResponse(
        body=None,
        error={
            "class": "ProviderTimeout",
            "message": "the episode deadline passed before the model provider answered",
        },
    )


class DeadlineProvider:
    """Wraps a provider so that a hanging model function cannot hold an episode past its deadline.

    The call runs on a daemon worker thread; when ``remaining_s()`` seconds pass first, the turn
    is answered with a ``ProviderTimeout`` error and the thread is abandoned (the driver then
    kills the sandbox: status ``timeout``). Exceptions of the inner call are re-raised here.

    Args:
        inner: the provider.
        remaining_s: seconds left until the episode's deadline.
        on_timeout: called when a turn ran into the deadline.
    """

    def __init__(
        self,
        inner: ModelProvider,
        remaining_s: Callable[[], float],
        on_timeout: Callable[[], None] = lambda: None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.remaining_s = remaining_s
        self.on_timeout = on_timeout

    def complete(self, request: Mapping[str, Any], role: str) -> ProviderResponse:
        """Answer through the inner provider, or with an error turn once the deadline passed.

        A request that arrives after the deadline is refused without calling the inner
        provider: a sandbox that queued many requests before being killed must not start a
        (paid) model call for each of them.
        """
        if self.remaining_s() <= 0:
            self.on_timeout()
            return _timeout_response()
        return self._within_deadline(lambda: self.inner.complete(request, role))

    def forward(self, call: ApiCall) -> ProviderResponse:
        """Forward a gateway request through the inner provider, within the deadline."""
        if self.remaining_s() <= 0:
            self.on_timeout()
            return _timeout_response()
        return self._within_deadline(lambda: self.inner.forward(call))

    def _within_deadline(self, answer: Callable[[], ProviderResponse]) -> ProviderResponse:
        box: list[ProviderResponse | BaseException] = []

        def work() -> None:
            try:
                box.append(answer())
            except BaseException as exc:  # handed to the driver's thread below
                box.append(exc)

        worker = threading.Thread(target=work, name="model-provider", daemon=True)
        worker.start()
        # the deadline may move while the call waits (rate-limit waits do not count against
        # the run's timeout): wait again for as long as it has moved
        worker.join(max(self.remaining_s(), 0.0))
        while not box and worker.is_alive() and self.remaining_s() > 0:
            worker.join(self.remaining_s())
        if not box:
            self.on_timeout()
            return _timeout_response()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]


def provider_for_workflow(
    workflow: Any, *, cwd: Path, settings: Any = None
) -> ModelProvider | None:
    """The provider of a loaded workflow's ``model`` block (None when it has none).

    A scripted function is looked up in the workflow's folder, then ``cwd`` (SPEC.md's
    resolution rule for the workflow's modules).

    Args:
        workflow: a `runner.domain.workflow.WorkflowFile`.
        cwd: the current directory of the command.
        settings: host settings for the ``openai`` provider; see `provider_for`.

    Raises:
        InputError: an unknown provider, or a scripted function that does not resolve.
    """
    model = workflow.spec.model
    spec = model.model_dump() if model is not None else None
    search_paths = [workflow.folder, cwd]
    if workflow.spec.program_steps():
        from runner.providers.gateway import GatewayRouter

        return GatewayRouter.for_workflow(workflow.spec, search_paths, settings)
    return provider_for(spec, search_paths=search_paths, settings=settings)


def check_provider(workflow: Any, *, cwd: Path, settings: Any = None) -> None:
    """Build a loaded workflow's model provider once and close it (``check`` and ``submit``).

    One gate for both commands, so that ``check`` never calls eligible what ``submit`` refuses.

    Args:
        workflow: a `runner.domain.workflow.WorkflowFile`.
        cwd: the current directory of the command.
        settings: host settings for the ``openai`` provider; see `provider_for`.

    A ``replay`` provider has nothing to build: it is served from a trace (``reproduce``);
    ``submit`` refuses it on its own (fresh runs need a model).

    Raises:
        InputError: an unknown provider, or a scripted function that does not resolve (file,
            line and field ``model.function`` named).
    """
    model = workflow.spec.model
    if model is not None and model.provider == "replay":
        return
    try:
        provider = provider_for_workflow(workflow, cwd=cwd, settings=settings)
    except InputError as exc:
        raise located_model_error(workflow, exc) from exc
    close = getattr(provider, "close", None)
    if callable(close):
        close()


def located_model_error(workflow: Any, exc: InputError) -> InputError:
    """``exc`` about a workflow's ``model`` block, with the workflow file and line named."""
    field = str(exc.fields.get("field") or "model")
    message = exc.message.removeprefix(f"{field}: ")
    line = workflow.line_of(tuple(field.split("."))) or workflow.line_of(("model",))
    return InputError(message, file=str(workflow.path), line=line, field=field)


def provider_for(
    model_spec: Mapping[str, Any] | None,
    *,
    search_paths: Sequence[Path] = (),
    recorded_calls: Sequence[Mapping[str, Any]] | None = None,
    settings: Any = None,
) -> ModelProvider | None:
    """Return the provider a workflow's ``model`` block asks for (None when the workflow has none).

    Args:
        model_spec: the normalised workflow's ``model`` (``{"provider", "function"?, ...}``).
        search_paths: where a scripted function's module is looked up.
        recorded_calls: when given, a `ReplayProvider` over them, whatever the spec says.
        settings: host settings (`runner.settings.Settings`) for the ``openai`` provider's
            endpoint and key; None reads the host's ``OPENAI_*`` environment.

    Raises:
        InputError: an unknown provider, or a scripted function that does not resolve.

    """
    if recorded_calls is not None:
        return ReplayProvider(recorded_calls)
    if model_spec is None:
        return None
    kind = model_spec.get("provider")
    if kind == "scripted":
        function = model_spec.get("function")
        if not isinstance(function, str):
            raise InputError("scripted provider needs 'function: module:func'", field="model")
        return ScriptedProvider(function, search_paths)
    if kind == "openai":
        from runner.providers.openai import OpenAIProvider

        name = model_spec.get("name")
        return OpenAIProvider.from_settings(settings, model=name if isinstance(name, str) else None)
    if kind == "anthropic":
        from runner.providers.anthropic import AnthropicProvider

        return AnthropicProvider.from_settings(settings)
    raise InputError(
        f"model provider {kind!r} is not available here (scripted, replay, openai, anthropic)",
        field="model.provider",
    )
