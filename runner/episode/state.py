"""What the host learns during one episode, and the status it classifies from it.

`EpisodeState` consumes `runner.episode.channel.ChannelEvent`s (answering ``hello`` with
``start``, ``model_request`` with ``model_response``, ``gateway_request`` with
``gateway_response`` through the episode's gateway, `runner.episode.gatewayturns`, and
``episode`` with ``shutdown``), meters every model turn (tokens, price, the turns a ceiling
refused), writes the trace header and call lines as they come (a program's model call line
with what the host served, its witness), and at the end (`EpisodeState.finish`) classifies
the status (`runner.episode.status`; the rules are in `runner.episode.driver`) and writes the
``end`` line (both built by `runner.episode.tracelines`). Memory stays bounded: calls go
straight to the trace file; outbound destinations and coverage reasons are capped
(`runner.episode.outbound.MAX_OUTBOUND`, `runner.episode.tracelines.MAX_COVERAGE`), with the
number dropped recorded. Disk stays bounded too: past the policy's ``max_calls`` call lines, or
at a call line that would make the trace longer than ``max_trace_mb``, the host accepts no
further call (nor model request), kills the sandbox and the run ends ``limit_exceeded`` with
``end.limit: {name, value}`` (a sandbox forging a million call lines cost the host
gigabytes).

The outbound log (`runner.episode.outbound.OutboundLog`) holds distinct destinations with
the count of their attempts; attempts past its cap are ``outbound_dropped`` and make
``coverage`` ``partial``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner.backends.base import ExitState
from runner.episode import gatewayhost
from runner.episode.channel import Channel, ChannelEvent
from runner.episode.gatewayturns import GatewayTurns
from runner.episode.outbound import OutboundLog
from runner.episode.prepare import start_message
from runner.episode.request import EpisodeRequest, EpisodeResult, PreparedRun
from runner.episode.status import classify, with_runtime_oom
from runner.episode.tracelines import MAX_COVERAGE, end_line, write_header
from runner.errors import InputError
from runner.hostlog import get_logger
from runner.ledger.pricing import estimate_usd
from runner.providers.base import ModelProvider, ProviderResponse
from runner.providers.metered import CEILING_ERROR_CLASS
from runner.trace.format import encode_body
from runner.trace.writer import TraceFull
from runner.wire import observed, protocol

if TYPE_CHECKING:
    from runner.trace.writer import TraceWriter

log = get_logger(__name__)

_BODY_FIELDS = ("body", "body_encoding", "truncated", "original_length", "sha256")


@dataclass
class EpisodeState:
    """Mutable record of one episode; see the module docstring."""

    request: EpisodeRequest
    prepared: PreparedRun
    channel: Channel
    image_id: str | None = None
    backend_name: str = "docker"
    node: str | None = None
    sandbox_name: str | None = None
    trace: TraceWriter | None = None
    hello: dict[str, Any] | None = None
    episode: dict[str, Any] | None = None
    runtime_error: dict[str, Any] | None = None
    protocol_error: str | None = None
    invalid_message: str | None = None
    infra_error: str | None = None
    teardown_error: str | None = None
    write_failed: str | None = None
    shutdown_sent: bool = False
    killed_for: str | None = None
    provider_timed_out: bool = False
    budget_cut: bool = False
    wants_kill: str | None = None
    limit: dict[str, Any] | None = None
    calls_refused: int = 0
    last_call_index: int = -1
    steps: dict[str, str] = field(default_factory=dict)
    outbound: OutboundLog = field(default_factory=OutboundLog)
    coverage: list[dict[str, Any]] = field(default_factory=list)
    coverage_dropped: int = 0
    divergences: list[dict[str, Any]] = field(default_factory=list)
    divergences_dropped: int = 0
    nondeterminism: dict[str, Any] | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = 0
    usd: float = 0.0
    served: deque[ProviderResponse] = field(default_factory=deque)
    gateway: GatewayTurns = field(init=False)
    unpriced_models: list[str] = field(default_factory=list)
    ceiling_refusals: list[dict[str, Any]] = field(default_factory=list)
    runtime_meter: dict[str, int] = field(default_factory=dict)
    sandbox_s: float = 0.0
    rate_limit_wait_s: float = 0.0
    channel_events: list[dict[str, Any]] = field(default_factory=list)
    _known_steps: frozenset[str] | None = None

    def __post_init__(self) -> None:
        self.gateway = GatewayTurns(self.request, self.prepared)

    @property
    def undeclared_tools(self) -> dict[tuple[str, str], int]:
        """``(step_id, tool name) -> requests`` offering a tool the step does not declare."""
        return self.gateway.undeclared_tools

    @property
    def gateway_notes(self) -> list[dict[str, Any]]:
        """What the sandbox's gateway answered itself (``gateway_note``s, cleaned)."""
        return self.gateway.notes

    @property
    def gateway_notes_dropped(self) -> int:
        """The ``gateway_note``s past the kept ones."""
        return self.gateway.notes_dropped

    # -- events ------------------------------------------------------------------------------

    def on_event(self, event: ChannelEvent, provider: ModelProvider | None) -> list[dict[str, Any]]:
        """Take one channel event; return the messages to send back, in order."""
        if event.kind != "message":
            self._channel_event(event)
            return []
        message = event.message or {}
        kind = message["type"]
        if self.hello is None and kind != "hello":
            self.protocol_error = f"first message was {kind!r}, not hello"
            self.wants_kill = "protocol_error"
            return []
        handler = getattr(self, f"_on_{kind}", None)
        if handler is None:  # a protocol type with no place in an episode (e.g. ``manifest``)
            self.protocol_error = f"unexpected message {kind!r} during an episode"
            self.wants_kill = "protocol_error"
            return []
        result: list[dict[str, Any]] = handler(message, provider)
        return result

    def _channel_event(self, event: ChannelEvent) -> None:
        record: dict[str, Any] = {"kind": event.kind, "line": event.line, "size": event.size}
        if event.detail:
            record["detail"] = event.detail
        log.warning("channel_event", run_id=self.prepared.run_id, **record)
        if len(self.channel_events) < MAX_COVERAGE:
            self.channel_events.append(record)
        if event.kind == "truncated":
            self.wants_kill = "output_limit"
        elif event.kind == "invalid":
            # A line the strict decoder refuses (or an unknown type) was not written by the
            # runtime: the sandbox's record can no longer be believed. Kill it; the trace
            # still ends with its end line (`finish`).
            if self.invalid_message is None:
                self.invalid_message = f"stdout line {event.line}: {event.detail}"
            self.wants_kill = "invalid_message"

    def _on_hello(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        if self.hello is not None:
            self.protocol_error = "a second hello"
            return []
        self.hello = message
        self._write_header()
        if message.get("protocol") != protocol.PROTOCOL_VERSION:
            self.protocol_error = (
                f"runtime speaks protocol {message.get('protocol')!r}, host speaks "
                f"{protocol.PROTOCOL_VERSION}"
            )
            self.wants_kill = "protocol_error"
            return []
        return [start_message(self.prepared.run_spec, self.prepared.manifest)]

    def _on_step(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        # Only the workflow's own step ids are kept: a sandbox sending millions of made-up
        # ids must not grow the host's memory (tests/integration/test_attacks_channel.py).
        step_id, status = message.get("step_id"), message.get("state")
        if isinstance(step_id, str) and isinstance(status, str) and step_id in self._step_ids():
            self.steps[step_id] = status[:32]
        return []

    def _step_ids(self) -> frozenset[str]:
        if self._known_steps is None:
            steps = self.prepared.run_spec["workflow"].get("steps") or []
            self._known_steps = frozenset(
                str(s["id"]) for s in steps if isinstance(s, dict) and "id" in s
            )
        return self._known_steps

    def _on_call(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        record = message.get("record")
        if not isinstance(record, dict):
            self.protocol_error = "call message without a record"
            return []
        if self.limit is not None:  # past a limit nothing more is accepted (or kept)
            self.calls_refused += 1
            return []
        witnessed = self.gateway.witnessed(record.get("index"))
        if record.get("tool") == "model" and witnessed is not None:
            host_recorded = self._host_recorded(record, witnessed[0])
            record = gatewayhost.witnessed_record(host_recorded, *witnessed)
        elif record.get("tool") in ("model", "user") and self.served:
            record = self._host_recorded(record, self.served.popleft())
        assert self.trace is not None
        limits = self.prepared.spec.limits
        if self.trace.calls >= limits.max_calls:
            self._exceeded("max_calls", limits.max_calls)
            return []
        try:
            self.trace.call(record)
        except TraceFull:
            self._exceeded("max_trace_mb", limits.max_trace_mb)
            return []
        index = record.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            self.last_call_index = max(self.last_call_index, index)
        return []

    def _exceeded(self, name: str, value: int) -> None:
        """A policy limit was reached: accept nothing more and have the sandbox killed."""
        self.limit = {"name": name, "value": value}
        self.calls_refused += 1
        self.wants_kill = "limit_exceeded"
        assert self.trace is not None
        log.warning(
            "episode_limit_exceeded",
            run_id=self.prepared.run_id,
            limit=name,
            value=value,
            calls=self.trace.calls,
            trace_bytes=self.trace.bytes,
        )

    @staticmethod
    def _host_recorded(record: dict[str, Any], served: ProviderResponse) -> dict[str, Any]:
        """Return ``record`` with the raw body and model id the host served (SPEC.md).

        The host, not the sandbox, is the witness of a model turn: the body it served and the
        model id read from that body replace whatever the sandbox reported.
        """
        record = {k: v for k, v in record.items() if k not in _BODY_FIELDS}
        if served.body is not None:
            record.update(encode_body(served.body))
        record["model"] = served.model
        return record

    def _on_gateway_request(
        self, message: dict[str, Any], provider: ModelProvider | None
    ) -> list[dict[str, Any]]:
        message_id = gatewayhost.message_id(message)
        if message_id is None:
            self.protocol_error = "gateway_request without a usable id"
            return []
        if self.killed_for or self.wants_kill:  # buffered by a killed sandbox: never paid for
            return []
        turn = self.gateway.answer(message, message_id, provider)
        if turn.response is not None:
            if turn.metered:
                self._account(turn.response)
            self._note_refusal(message, "model", turn.response)
        return [turn.reply]

    def _on_gateway_note(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        self.gateway.note(message)
        return []

    def _account(self, response: ProviderResponse) -> None:
        tokens_in, tokens_out = response.tokens()
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.model_calls += 1
        self._charge(response.model, tokens_in, tokens_out)

    def _on_model_request(
        self, message: dict[str, Any], provider: ModelProvider | None
    ) -> list[dict[str, Any]]:
        if self.killed_for or self.wants_kill:  # buffered by a killed sandbox: never paid for
            log.info("model_request_after_kill", run_id=self.prepared.run_id, id=message.get("id"))
            return []
        role = message.get("role", "model")
        request = message.get("request")
        if provider is None:
            response = ProviderResponse(
                body=None,
                error={"class": "ProviderError", "message": "the workflow configures no model"},
            )
        elif not isinstance(request, dict):
            response = ProviderResponse(
                body=None, error={"class": "ProviderError", "message": "request is not an object"}
            )
        else:
            response = provider.complete(request, str(role))
        self._account(response)
        self.served.append(response)
        reply: dict[str, Any] = {
            "type": "model_response",
            "id": message.get("id"),
            "body": response.body,
            "model": response.model,
            "usage": dict(response.usage),
        }
        if response.error is not None:
            reply["error"] = dict(response.error)
        self._note_refusal(message, str(role), response)
        return [reply]

    def _note_refusal(self, message: dict[str, Any], role: str, response: ProviderResponse) -> None:
        """Remember a turn the host refused for a ceiling (witnessed here, not told by the run).

        Nothing for an answer that is not a ceiling's refusal (`CEILING_ERROR_CLASS`).
        """
        error = response.error
        if error is None or error.get("class") != CEILING_ERROR_CLASS:
            return
        if len(self.ceiling_refusals) >= MAX_COVERAGE:
            return
        index = message.get("index")  # the sandbox's word: used only when it is plausible
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            index = self.last_call_index + 1
        self.ceiling_refusals.append(
            {
                "call_index": index,
                "tool": "user" if role == "user" else "model",
                "message": str(error.get("message", "")),
            }
        )

    def _charge(self, model: str | None, tokens_in: int, tokens_out: int) -> None:
        prices = getattr(self.request.policy, "prices", None)
        if not isinstance(prices, Mapping) or (tokens_in == 0 and tokens_out == 0):
            return
        try:
            self.usd += estimate_usd(prices, model or "", tokens_in, tokens_out)
        except (InputError, ValueError):
            # never a silent zero: the end line names the models without a price
            name = model or "<no model id>"
            if name not in self.unpriced_models and len(self.unpriced_models) < MAX_COVERAGE:
                self.unpriced_models.append(name)

    def _on_egress(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        self.outbound.add(message)
        return []

    def _on_coverage(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        if len(self.coverage) >= MAX_COVERAGE:
            self.coverage_dropped += 1
            return []
        self.coverage.append({k: v for k, v in message.items() if k != "type"})
        return []

    def _on_divergence(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        if len(self.divergences) >= MAX_COVERAGE:
            self.divergences_dropped += 1
        else:
            self.divergences.append({k: v for k, v in message.items() if k != "type"})
        return []

    def _on_nondeterminism(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        if self.nondeterminism is None:  # once; the sandbox's word, checked by the reader
            self.nondeterminism = observed.report(message)
        return []

    def _on_meter(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        for key in ("tokens_in", "tokens_out"):
            value = message.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.runtime_meter[key] = self.runtime_meter.get(key, 0) + value
        return []

    def _on_episode(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        if self.episode is None:
            self.episode = message
        return [{"type": "shutdown"}]

    def _on_error(self, message: dict[str, Any], _: Any) -> list[dict[str, Any]]:
        self.runtime_error = {
            "class": str(message.get("class", "RuntimeError")),
            "message": str(message.get("message", "")),
        }
        return [{"type": "shutdown"}]

    # -- trace -------------------------------------------------------------------------------

    def _write_header(self) -> None:
        write_header(self)

    # -- classification ----------------------------------------------------------------------

    def classify(self, exit_state: ExitState | None) -> tuple[str, str | None]:
        """Return ``(status, reason)`` by the rules of `runner.episode.driver`."""
        return classify(self, exit_state)

    def finish(self, exit_state: ExitState | None) -> EpisodeResult:
        """Classify, write the header (if still missing) and the ``end`` line."""
        exit_state = with_runtime_oom(self.episode, exit_state)
        status, reason = self.classify(exit_state)
        self._write_header()
        end = end_line(self, exit_state, status, reason)
        assert self.trace is not None
        self.trace.end(end)
        return EpisodeResult(self.prepared.run_id, status, self.prepared.trace_path, end)
