"""One episode's model gateway on the host: each ``gateway_request`` answered, and what it keeps.

A program step's model calls arrive as ``gateway_request`` messages (docs/internals.md, "The
model gateway"). `GatewayTurns.answer` takes one: the request checked
(`runner.episode.gatewayhost.parse_request`; a bad or refused one answered ``400``, never
forwarded), the tools it offers its model that the step does not declare refused (fail closed,
`runner.providers.offered`), then routed: a Responses retrieval answered from the run's own
answers (`runner.providers.retrieval.RunResponses`; in reproduce from the recording, like any
call), any other call forwarded through the run's provider (metered and routed by whoever built
it), no provider a ``400`` saying so. What it keeps, each bounded: the answer served at each call
index (the host's witness of the program's call line, taken by `witnessed`), the run's Responses
answers, the undeclared tools offered per (step, name) (``end.undeclared_tools``; the episode
ends ``denied``) and the gateway's notes of what it answered itself (``gateway_note``).

What it does not do: meter (the episode state counts tokens, prices and ceiling refusals from
the `GatewayTurn` it returns), decide the message is acceptable at all (a usable ``id``, a live
sandbox: the state's protocol rules), or build messages (`runner.episode.gatewayhost`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner.episode import gatewayhost
from runner.episode.outbound import MAX_OUTBOUND
from runner.episode.tracelines import MAX_COVERAGE
from runner.hostlog import get_logger
from runner.providers.apis import SERVED_FROM_RUN, ApiCall
from runner.providers.base import ModelProvider, ProviderResponse
from runner.providers.offered import undeclared_offered
from runner.providers.retrieval import RunResponses

if TYPE_CHECKING:
    from runner.episode.request import EpisodeRequest, PreparedRun

__all__ = ["GatewayTurn", "GatewayTurns"]

log = get_logger(__name__)


@dataclass(frozen=True)
class GatewayTurn:
    """What one ``gateway_request`` came to.

    Attributes:
        reply: the ``gateway_response`` to send back.
        response: the provider's (or the run's own) answer; None when the request was refused
            before reaching either.
        metered: a model call whose tokens and price count (False for a refusal and for a
            retrieval: nothing forwarded, nothing charged).
    """

    reply: dict[str, Any]
    response: ProviderResponse | None = None
    metered: bool = False


@dataclass
class GatewayTurns:
    """The gateway requests of one episode; see the module docstring.

    Attributes:
        request: the episode's request (its ``mode``).
        prepared: the prepared run (run id, the workflow as the run was given, the manifest).
        undeclared_tools: ``(step_id, tool name) -> requests`` offering it (at most
            `runner.episode.tracelines.MAX_COVERAGE` keys: a sandbox sending made-up names
            must not grow the host's memory).
        notes: the gateway's notes, cleaned (at most ``MAX_COVERAGE``); ``notes_dropped``
            counts the rest.
    """

    request: EpisodeRequest
    prepared: PreparedRun
    undeclared_tools: dict[tuple[str, str], int] = field(default_factory=dict)
    notes: list[dict[str, Any]] = field(default_factory=list)
    notes_dropped: int = 0
    _served_at: dict[int, tuple[ProviderResponse, ApiCall]] = field(
        default_factory=dict, init=False, repr=False
    )
    _responses: RunResponses = field(default_factory=RunResponses, init=False, repr=False)

    def answer(
        self, message: dict[str, Any], message_id: str, provider: ModelProvider | None
    ) -> GatewayTurn:
        """Check, route and answer one ``gateway_request``.

        Args:
            message: the message as the sandbox sent it (hostile: every field checked).
            message_id: its ``id``, already found usable (`gatewayhost.message_id`).
            provider: the run's provider (metered, routed); None when the workflow configures
                no model.

        Returns:
            The turn: the reply always; the answer and whether it counts as a model call.
        """
        mode = self.request.mode
        try:
            call = gatewayhost.parse_request(
                message,
                self.prepared.run_spec["workflow"],
                reproduce=mode == "reproduce",
                live=mode == "record",
            )
        except gatewayhost.GatewayRequestError as exc:
            event = (
                "gateway_request_refused"
                if isinstance(exc, gatewayhost.GatewayRequestRefused)
                else "gateway_request_invalid"
            )
            log.warning(event, run_id=self.prepared.run_id, param=exc.param, problem=str(exc))
            return GatewayTurn(gatewayhost.invalid(message_id, exc))
        undeclared = self._offered(call)
        if undeclared:  # fail closed: never forwarded, never paid for
            refusal = gatewayhost.UndeclaredToolsOffered(str(call.step_id), undeclared)
            log.warning(
                "gateway_request_refused", run_id=self.prepared.run_id, problem=str(refusal)
            )
            return GatewayTurn(gatewayhost.invalid(message_id, refusal))
        from_run = call.api in SERVED_FROM_RUN
        if from_run and mode != "reproduce":  # never fetched live
            response = self._responses.answer(call)
        elif provider is None:
            response = ProviderResponse(
                body=None,
                status=400,
                error={"class": "ProviderError", "message": "the workflow configures no model"},
            )
        else:
            response = provider.forward(call)
        self._responses.remember(call, response)
        index = message.get("index")
        if (
            isinstance(index, int)
            and not isinstance(index, bool)
            and index >= 0
            and len(self._served_at) < MAX_OUTBOUND
        ):
            self._served_at[index] = (response, call)
        # a retrieval is no model call: nothing forwarded, nothing charged
        return GatewayTurn(gatewayhost.reply(message_id, response), response, not from_run)

    def witnessed(self, index: object) -> tuple[ProviderResponse, ApiCall] | None:
        """Take the answer served for call ``index`` and its call, once (None: none served)."""
        return self._served_at.pop(index, None) if isinstance(index, int) else None

    def note(self, message: dict[str, Any]) -> None:
        """Keep a ``gateway_note`` (what the sandbox's gateway answered itself), bounded."""
        if len(self.notes) >= MAX_COVERAGE:
            self.notes_dropped += 1
            return
        note = gatewayhost.clean_note(message)
        log.info("gateway_answered_itself", run_id=self.prepared.run_id, **note)
        self.notes.append(note)

    def _offered(self, call: ApiCall) -> list[str]:
        """Count and return the tools this request offers that its step does not declare.

        They are named (``end.undeclared_tools``, a warning) and the request is refused:
        the episode ends ``denied`` (`runner.providers.offered` says why).
        """
        step_id, workflow = str(call.step_id), self.prepared.run_spec["workflow"]
        names = undeclared_offered(
            call.api, call.request, workflow, step_id, self.prepared.manifest
        )
        for name in names:
            key = (step_id, name)
            if key not in self.undeclared_tools and len(self.undeclared_tools) >= MAX_COVERAGE:
                continue
            if key not in self.undeclared_tools:
                log.warning(
                    "gateway_offered_undeclared_tool",
                    run_id=self.prepared.run_id,
                    step_id=step_id,
                    tool=name,
                )
            self.undeclared_tools[key] = self.undeclared_tools.get(key, 0) + 1
        return names
