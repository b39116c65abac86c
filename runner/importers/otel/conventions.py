"""The conventions table: which span family a span belongs to, and its role in an agent run.

Every span is classified once, when it is read (`classify`), into a *family* (the convention
or instrumentation that wrote it) and a *role*:

- ``model``: one model call (a provider span, or a framework's wrapper around one: a wrapper
  and the model spans below it are one logical call, `runner.importers.otel.sessions`);
- ``tool``: one executed tool call (the source of truth for that call);
- ``agent``: an agent's own step (an invocation, a run, a workflow): its failure is the
  run's failure, its name the agent's;
- ``ignore``: everything else, with the reason (transport, plumbing, a phase of a tool).

The first rule that matches wins, in the order of `FAMILIES`. A span no rule knows is
``unknown:<scope or name>``, role ``ignore``; ``import --explain`` names it (never a silent
skip). Each entry cites the specification or source code it follows.

The table (family: how it is recognised; model / tool / agent spans; source):

- ``claude-platform``: scope ``com.anthropic.claude-platform`` (API spans, kind SERVER) or
  ``com.anthropic.sdk.*`` (SDK spans, CLIENT), names ``anthropic.<API method>``. Model:
  ``anthropic.messages.*`` but ``count_tokens`` / ``batches`` (the SDK span and the API span
  the API attaches under it, one request, are one call); tool: ``anthropic.tool_use <tool>``;
  agent: ``anthropic.sessions.*`` (Managed Agents). Source:
  platform.claude.com/docs/en/api/opentelemetry/spans (beta; GenAI conventions as of
  2026-09-24, plus ``anthropic.*``).
- ``claude-code``: names ``claude_code.*``. Model ``claude_code.llm_request``, tool
  ``claude_code.tool``, agent ``claude_code.interaction``. Source:
  code.claude.com/docs/en/monitoring-usage, "Traces (beta)".
- ``adk``: scope ``gcp.vertex.agent`` or ``gcp.vertex.agent.*`` attributes. Model ``call_llm``
  (a wrapper of the provider span inside it), tool ``execute_tool <tool>``, agent
  ``invocation`` / ``invoke_agent`` / ``agent_run`` / ``invoke_workflow``. Source:
  google/adk-python ``src/google/adk/telemetry/tracing.py``.
- ``any-agent``: ``gen_ai.operation.name`` ``call_llm``, or ``gen_ai.tool.args`` /
  ``gen_ai.output`` on ``execute_tool`` / ``invoke_agent``. Source: mozilla-ai/any-agent
  ``src/any_agent/tracing/``.
- ``genai`` (``openlit``, ``pydantic-ai``, ``strands``, ``autogen`` by scope):
  ``gen_ai.operation.name``. Model ``chat`` / ``text_completion`` / ``generate_content`` /
  ``completion`` / ``responses``; tool ``execute_tool``; agent ``invoke_agent`` (client and
  internal), ``create_agent``, ``invoke_workflow`` (semantic-conventions-genai v0.1.0 folds
  it into ``gen_ai.invoke_agent.internal`` and names it by ``gen_ai.agent.name`` instead of
  ``gen_ai.workflow.name``), OpenLIT's ``agent``. Source: opentelemetry.io/docs/specs/semconv/
  gen-ai/ (to v1.41) and open-telemetry/semantic-conventions-genai v0.1.0
  ``docs/gen-ai/gen-ai-spans.md``, ``gen-ai-agent-spans.md``.
- ``openinference`` (``smolagents`` by scope): ``openinference.span.kind``. Model ``LLM``, tool
  ``TOOL``, agent ``AGENT``. Source: Arize-ai/openinference ``spec/semantic_conventions.md``.
- ``openllmetry``: ``traceloop.span.kind`` / ``llm.request.type``. Model ``llm.request.type``
  ``chat`` / ``completion``, tool ``tool``, agent ``agent``. Source: traceloop/openllmetry
  ``packages/opentelemetry-semantic-conventions-ai``.
- ``langsmith``: ``langsmith.span.kind``. Model ``llm`` / ``chat_model``, tool ``tool``.
  Source: docs.smith.langchain.com, "Trace with OpenTelemetry".
- ``pydantic-ai`` (before its GenAI operation names): tool ``running tool``, agent
  ``agent run``. Source: pydantic/pydantic-ai ``pydantic_ai/models/instrumented.py``.
- ``genai-legacy``: flattened ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``, model.
  Source: open-telemetry/semantic-conventions v1.26 ``docs/gen-ai/gen-ai-spans.md``.
- ``genai-wrapper``: a requested model with messages or usage and no operation name, model
  (a framework's wrapper). Source: this importer.
- ``a2a``, ``rpc``, ``db``, ``messaging``, ``http``: transport, ignored (never the agent's own
  step). Source: the OpenTelemetry semantic conventions of each.

OpenAI Agents handoff spans (OpenInference ``TOOL`` spans named ``handoff ...``) are
ignored: the model's ``transfer_to_*`` call is the tool call, its result comes from the next
request. Chains, retrievers, embeddings, guardrails and evaluators are ignored with their
family named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["FAMILIES", "Classified", "Family", "Role", "SpanView", "classify"]

Role = Literal["model", "tool", "agent", "ignore"]


@dataclass(frozen=True)
class SpanView:
    """What classification reads of a span: name, attributes, scope, service and kind."""

    name: str
    attrs: Mapping[str, Any]
    scope: str = ""
    service: str = ""
    kind: str = ""


@dataclass(frozen=True)
class Classified:
    """A span's family, role and (for ``ignore``) why."""

    family: str
    role: Role
    reason: str = ""


@dataclass(frozen=True)
class Family:
    """One row of the table: the family's name, its source, and its rule."""

    name: str
    source: str
    rule: Callable[[SpanView], Classified | None]


_MODEL_OPS = frozenset(
    {"chat", "text_completion", "generate_content", "completion", "responses", "call_llm"}
)
_AGENT_OPS = frozenset(
    {"invoke_agent", "create_agent", "invoke_workflow", "agent", "invoke_agent.internal"}
)
_IGNORED_OPS = {
    "embeddings": "embeddings, not a conversation turn",
    "embedding": "embeddings, not a conversation turn",
    "retrieval": "a retrieval step, not a model or tool call",
    "retrieve": "a retrieval step, not a model or tool call",
    "vectordb": "a vector store call (transport)",
    "framework": "framework plumbing",
    "execute_task": "a task wrapper (its model and tool spans are read)",
    "workflow": "a workflow wrapper (its model and tool spans are read)",
    "image": "image generation, not a conversation turn",
    "audio": "audio, not a conversation turn",
    "plan": "a planning wrapper (its model spans are read)",
}
_OI_IGNORED = {
    "CHAIN": "an OpenInference chain (structure; its LLM and TOOL spans are read)",
    "RETRIEVER": "an OpenInference retriever",
    "EMBEDDING": "an OpenInference embedding",
    "RERANKER": "an OpenInference reranker",
    "GUARDRAIL": "an OpenInference guardrail",
    "EVALUATOR": "an OpenInference evaluator",
    "PROMPT": "an OpenInference prompt template",
    "UNKNOWN": "an OpenInference span of unknown kind",
}


# keys whose presence marks a family (looked up, not scanned: every span is classified)
_ADK_KEYS = (
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.llm_response",
    "gcp.vertex.agent.tool_call_args",
    "gcp.vertex.agent.tool_response",
    "gcp.vertex.agent.invocation_id",
    "gcp.vertex.agent.event_id",
)
_LEGACY_KEYS = tuple(
    f"gen_ai.{side}.0.{part}"
    for side in ("prompt", "completion")
    for part in ("role", "content", "tool_calls.0.name", "finish_reason")
)


def _op(view: SpanView) -> str | None:
    op = view.attrs.get("gen_ai.operation.name")
    return op.strip().lower() if isinstance(op, str) and op.strip() else None


def _claude_platform(view: SpanView) -> Classified | None:
    scope = view.scope
    platform = scope.startswith("com.anthropic.claude-platform") or scope.startswith(
        "com.anthropic.sdk"
    )
    if not (platform or (view.service == "claude-platform" and view.name.startswith("anthropic."))):
        return None
    family = "claude-platform"
    name = view.name
    if name.startswith("anthropic.tool_use"):
        return Classified(family, "tool")
    if name.startswith("anthropic.messages.") and not any(
        part in name for part in (".count_tokens", ".batches")
    ):
        return Classified(family, "model")
    if name.startswith("anthropic.sessions") or name.startswith("anthropic.agents"):
        return Classified(family, "agent")
    op = _op(view)
    if op in _MODEL_OPS:
        return Classified(family, "model")
    if op == "execute_tool":
        return Classified(family, "tool")
    return Classified(family, "ignore", "a Claude API request that is not a model call")


def _claude_code(view: SpanView) -> Classified | None:
    if not view.name.startswith("claude_code."):
        return None
    family = "claude-code"
    name = view.name
    if name == "claude_code.llm_request":
        return Classified(family, "model")
    if name == "claude_code.tool":
        return Classified(family, "tool")
    if name == "claude_code.interaction":
        return Classified(family, "agent")
    if name.startswith("claude_code.tool."):
        return Classified(family, "ignore", "a phase of its tool span (permission wait, run)")
    return Classified(family, "ignore", "a Claude Code hook or internal step")


def _adk(view: SpanView) -> Classified | None:
    adk = view.scope == "gcp.vertex.agent" or any(k in view.attrs for k in _ADK_KEYS)
    if not adk:
        return None
    name, op = view.name, _op(view)
    if name == "call_llm" or op in _MODEL_OPS:
        return Classified("adk", "model")
    if name.startswith("execute_tool") or op == "execute_tool":
        return Classified("adk", "tool")
    if op in _AGENT_OPS or name.split(" ")[0] in ("invocation", "invoke_agent", "agent_run"):
        return Classified("adk", "agent")
    return Classified("adk", "ignore", "an ADK step that is not a model, tool or agent span")


def _any_agent(view: SpanView) -> Classified | None:
    op = _op(view)
    if op == "call_llm":
        return Classified("any-agent", "model")
    if op in ("execute_tool", "invoke_agent") and (
        "gen_ai.tool.args" in view.attrs or "gen_ai.output" in view.attrs
    ):
        return Classified("any-agent", "tool" if op == "execute_tool" else "agent")
    return None


def _genai_family(view: SpanView) -> str:
    scope = view.scope.lower()
    if scope.startswith("openlit"):
        return "openlit"
    if "pydantic" in scope or "logfire" in scope:
        return "pydantic-ai"
    if "strands" in scope:
        return "strands"
    if "autogen" in scope:
        return "autogen"
    return "genai"


def _genai(view: SpanView) -> Classified | None:
    op = _op(view)
    if op is None:
        return None
    family = _genai_family(view)
    if op in _MODEL_OPS:
        return Classified(family, "model")
    if op == "execute_tool":
        return Classified(family, "tool")
    if op in _AGENT_OPS:
        return Classified(family, "agent")
    reason = _IGNORED_OPS.get(op, f"GenAI operation {op!r} is not a model, tool or agent step")
    return Classified(family, "ignore", reason)


def _openinference(view: SpanView) -> Classified | None:
    kind = view.attrs.get("openinference.span.kind")
    if not isinstance(kind, str) or not kind.strip():
        return None
    kind = kind.strip().upper()
    family = "smolagents" if "smolagents" in view.scope.lower() else "openinference"
    if kind == "LLM":
        return Classified(family, "model")
    if kind == "TOOL":
        if view.name.lower().startswith("handoff"):
            return Classified(
                family, "ignore", "an agent handoff (the transfer is the model's call)"
            )
        return Classified(family, "tool")
    if kind == "AGENT":
        return Classified(family, "agent")
    return Classified(family, "ignore", _OI_IGNORED.get(kind, f"OpenInference kind {kind!r}"))


def _openllmetry(view: SpanView) -> Classified | None:
    kind = view.attrs.get("traceloop.span.kind")
    request = view.attrs.get("llm.request.type")
    if isinstance(request, str) and request.lower() in ("chat", "completion"):
        return Classified("openllmetry", "model")
    if not isinstance(kind, str):
        return None
    kind = kind.lower()
    if kind == "tool":
        return Classified("openllmetry", "tool")
    if kind == "agent":
        return Classified("openllmetry", "agent")
    return Classified("openllmetry", "ignore", f"an OpenLLMetry {kind} wrapper")


def _langsmith(view: SpanView) -> Classified | None:
    kind = view.attrs.get("langsmith.span.kind")
    if not isinstance(kind, str):
        return None
    kind = kind.lower()
    if kind in ("llm", "chat_model"):
        return Classified("langsmith", "model")
    if kind == "tool":
        return Classified("langsmith", "tool")
    return Classified("langsmith", "ignore", f"a LangSmith {kind} run")


def _pydantic_ai(view: SpanView) -> Classified | None:
    if view.name.startswith("running tool") and "gen_ai.tool.name" in view.attrs:
        return Classified("pydantic-ai", "tool")
    if view.name.startswith("agent run") and (
        "agent_name" in view.attrs or "gen_ai.agent.name" in view.attrs
    ):
        return Classified("pydantic-ai", "agent")
    return None


def _legacy(view: SpanView) -> Classified | None:
    flat = any(k.startswith(("gen_ai.prompt.0.", "gen_ai.completion.0.")) for k in view.attrs)
    return Classified("genai-legacy", "model") if flat else None


_CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.input_messages.0.message.role",
)


def _wrapper(view: SpanView) -> Classified | None:
    a = view.attrs
    requested = "gen_ai.request.model" in a or "llm.model_name" in a
    if requested and any(k in a for k in _CONTENT_KEYS):
        return Classified("genai-wrapper", "model")
    return None


def _transport(view: SpanView) -> Classified | None:
    a = view.attrs
    if view.name.startswith("a2a.") or "a2a" in view.scope.lower():
        return Classified("a2a", "ignore", "agent-to-agent protocol plumbing (transport)")
    if any(k in a for k in ("rpc.system", "rpc.system.name", "rpc.method")):
        return Classified("rpc", "ignore", "an RPC call (transport, not an agent step)")
    if any(k in a for k in ("db.system", "db.system.name")):
        return Classified("db", "ignore", "a database call (transport, not an agent step)")
    if any(k in a for k in ("messaging.system",)):
        return Classified("messaging", "ignore", "a messaging call (transport)")
    if any(
        k in a
        for k in ("http.method", "http.request.method", "url.full", "http.url", "asgi.event.type")
    ):
        return Classified("http", "ignore", "an HTTP request (transport, not an agent step)")
    if view.scope.startswith(("opentelemetry.instrumentation.", "io.opentelemetry.")):
        library = view.scope.rsplit(".", 1)[-1]
        return Classified(library, "ignore", "an instrumented library call (transport)")
    return None


FAMILIES: tuple[Family, ...] = (
    Family(
        "claude-platform",
        "https://platform.claude.com/docs/en/api/opentelemetry/spans",
        _claude_platform,
    ),
    Family("claude-code", "https://code.claude.com/docs/en/monitoring-usage", _claude_code),
    Family("adk", "google/adk-python src/google/adk/telemetry/tracing.py", _adk),
    Family("any-agent", "mozilla-ai/any-agent src/any_agent/tracing/", _any_agent),
    Family(
        "genai",
        "https://github.com/open-telemetry/semantic-conventions-genai (v0.1.0) docs/gen-ai/",
        _genai,
    ),
    Family(
        "openinference",
        "https://github.com/Arize-ai/openinference/blob/main/spec/semantic_conventions.md",
        _openinference,
    ),
    Family(
        "openllmetry",
        "traceloop/openllmetry packages/opentelemetry-semantic-conventions-ai",
        _openllmetry,
    ),
    Family(
        "langsmith",
        "https://docs.smith.langchain.com/observability/how_to_guides/trace_with_opentelemetry",
        _langsmith,
    ),
    Family("pydantic-ai", "pydantic/pydantic-ai pydantic_ai/models/instrumented.py", _pydantic_ai),
    Family(
        "genai-legacy",
        "open-telemetry/semantic-conventions v1.26.0 docs/gen-ai/gen-ai-spans.md",
        _legacy,
    ),
    Family("genai-wrapper", "this importer: a framework wrapper of a model call", _wrapper),
    Family("transport", "OpenTelemetry semantic conventions: HTTP, RPC, database", _transport),
)


def classify(view: SpanView) -> Classified:
    """The family and role of a span (the first rule of `FAMILIES` that matches).

    Args:
        view: the span's name, decoded attributes, instrumentation scope, service and kind.

    Returns:
        The classification; a span no rule knows is family ``unknown:<scope or name>``,
        role ``ignore``.
    """
    for family in FAMILIES:
        found = family.rule(view)
        if found is not None:
            return found
    label = view.scope or (view.name.split(" ")[0] if view.name else "unnamed")
    return Classified(f"unknown:{label[:80]}", "ignore", "no convention in the table knows it")
