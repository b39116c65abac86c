"""Upper bounds of the tokens a model request is billed, for reservations made before a call.

A reservation must never be below what the provider then bills (`runner.ledger.ceilings`:
the ceiling holds for actuals within their estimates). `prompt_tokens_bound` is the one rule,
used for every forwarded model call (`runner.providers.metered`) and every judge call
(`runner.grading.judges`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "PER_MESSAGE_OVERHEAD_TOKENS",
    "REQUEST_OVERHEAD_TOKENS",
    "prompt_tokens_bound",
    "request_bytes",
]

# The chat format frames every message with a few tokens that are not in its JSON: OpenAI's
# "How to count tokens with tiktoken" (openai-cookbook, examples/How_to_count_tokens_with_tiktoken
# .ipynb) counts 3 per message plus 1 for a ``name`` (4 per message for gpt-3.5-turbo-0301), and
# 3 that prime the reply. We reserve twice the per-message figure, and one request-wide amount
# for the reply priming and the framing the provider puts around ``tools`` and
# ``response_format`` (rendered into a system message) -- whose own text is already counted in
# the request's bytes.
PER_MESSAGE_OVERHEAD_TOKENS = 8
REQUEST_OVERHEAD_TOKENS = 16


def request_bytes(request: Mapping[str, Any]) -> int:
    """UTF-8 bytes of ``request`` as canonical JSON (sorted keys, no whitespace).

    Never raises for a request decoded from the channel: lone surrogates count as the 3 bytes
    ``surrogatepass`` gives them, a non-finite number as its name, anything else as its
    ``repr``.
    """
    text = json.dumps(
        request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return len(text.encode("utf-8", "surrogatepass"))


def prompt_tokens_bound(request: Mapping[str, Any]) -> int:
    """An upper bound of the prompt tokens a provider bills for ``request`` (the whole of it).

    The rule: the UTF-8 bytes of the whole forwarded request as canonical JSON (`request_bytes`:
    messages, tools, ``response_format`` and every other setting, the model's name), plus
    `PER_MESSAGE_OVERHEAD_TOKENS` per message, plus `REQUEST_OVERHEAD_TOKENS`. Why it bounds:
    the byte-level BPE encodings of OpenAI models (tiktoken's ``cl100k_base``, ``o200k_base``)
    make every token of at least one byte, so a text has at most as many tokens as UTF-8 bytes;
    every text the provider tokenises (contents, names, tool and schema descriptions, keys) is
    in the request's JSON at no fewer bytes than it has (JSON only adds quotes, escapes and
    punctuation); what the chat format adds is the overhead counted above (see the constants'
    source).

    Args:
        request: the request exactly as it will be forwarded.

    Returns:
        The bound, in tokens.
    """
    messages = request.get("messages")
    count = len(messages) if isinstance(messages, list) else 0
    return request_bytes(request) + PER_MESSAGE_OVERHEAD_TOKENS * count + REQUEST_OVERHEAD_TOKENS
