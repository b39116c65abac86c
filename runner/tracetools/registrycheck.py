"""A trace's recorded tools against today's registry: what makes serving them meaningless.

SPEC.md ("What runs during reproduce"): a recorded tool missing from today's registry, or with
another schema hash than at call time, refuses strict replay. ``reproduce``
(`runner.reproduce.reproducer.refusals`) and the anchored fork (``reproduce --fork-at``,
``submit --anchor``: over the prefix's calls) ask the same question here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.domain.registry import Registry
    from runner.tracetools.reader import Trace

__all__ = ["registry_refusals"]


def registry_refusals(trace: Trace, registry: Registry) -> list[str]:
    """Why the tool calls of ``trace`` cannot be served with ``registry`` (empty: they can).

    Args:
        trace: the read trace (its ``calls``: every call, or a fork's prefix).
        registry: today's registry of the workflow (`runner.domain.registry.Registry`).

    An MCP protocol call (``mcp.*``: ``initialize``, ``tools/list``; `runner.runtime.mcphub`)
    is in no registry and is served as recorded: it is not checked.

    Returns:
        One reason per recorded tool missing from ``registry`` or whose schema hash at call
        time (the call's, else the run line's ``environment.tools``) differs from today's.
    """
    reasons: list[str] = []
    recorded_hashes = dict(trace.run.environment.tools)
    checked: set[str] = set()
    for call in trace.calls:
        if call.is_provider_call or call.tool in checked or call.is_mcp_protocol_call:
            continue
        checked.add(call.tool)
        then = call.schema_hash or recorded_hashes.get(call.tool)
        if call.tool not in registry:
            reasons.append(
                f"recorded tool {call.tool!r} (call #{call.index}) is missing from today's "
                "registry of the workflow"
            )
            continue
        now = registry.resolve(call.tool).schema_hash
        if then is not None and then != now:
            reasons.append(
                f"recorded tool {call.tool!r} changed its schema: schema hash {then[:12]} at "
                f"call time (call #{call.index}), {now[:12]} today"
            )
    return reasons
