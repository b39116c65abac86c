"""A scripted model for the help-desk example: deterministic, no network, runs on the host.

`respond` receives an OpenAI Chat Completions request and returns a chat completion, as the
`scripted` provider expects. Its policy: first search the knowledge base for the user's text,
then answer with the best article's resolution (or say that nothing was found).
"""

import json
from typing import Any, Dict, List

MODEL_ID = "helpdesk-scripted-2026-11"


def _tokens(messages: List[Dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "").split()) + 4 for m in messages)


def _function_name(request: Dict[str, Any], wanted: str) -> str:
    for entry in request.get("tools") or []:
        name = entry.get("function", {}).get("name", "")
        # tools are offered as runner.sdk.function_name(id): dots become "__"
        if name in (wanted, wanted.replace(".", "__")):
            return name
    raise ValueError(f"tool {wanted!r} not offered to the model")


def respond(request: Dict[str, Any]) -> Dict[str, Any]:
    """Answer one chat-completion request deterministically.

    Args:
        request: ``{"model", "messages", "tools", ...}`` in the OpenAI Chat Completions shape.

    Returns:
        A chat completion: ``id``, ``model``, ``choices[0].message``, ``usage``.
    """
    messages = request["messages"]
    tool_results = [m for m in messages if m.get("role") == "tool"]
    if not tool_results:
        question = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
        message: Dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_kb_1",
                    "type": "function",
                    "function": {
                        "name": _function_name(request, "kb.search"),
                        "arguments": json.dumps({"query": question}),
                    },
                }
            ],
        }
        finish = "tool_calls"
    else:
        try:
            articles = json.loads(tool_results[-1]["content"])
        except (TypeError, ValueError):
            articles = []
        if isinstance(articles, list) and articles:
            answer = articles[0]["resolution"]
        else:
            answer = "I could not find an article for this; a colleague will follow up."
        message = {"role": "assistant", "content": answer}
        finish = "stop"
    prompt_tokens = _tokens(messages)
    completion_tokens = len(json.dumps(message).split())
    return {
        "id": f"chatcmpl-helpdesk-{len(messages)}",
        "object": "chat.completion",
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
