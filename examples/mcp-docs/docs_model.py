"""A scripted model for the docs assistant: deterministic and offline, run on the host.

Called as ``respond(request, *, api, path)`` (see examples/agent-program/support_model.py):
it searches the documentation once with the user's question, then answers with what the
search returned. Swap it for a real model with ``model: {provider: openai, name: gpt-4.1-mini}``.
"""

import json

MODEL_ID = "docs-script-2026-01"
SEARCH = "docs__search_docs"


def chat_completion(request):
    """The Chat Completions response (a dict) to ``request``."""
    messages = request.get("messages") or []
    offered = [t["function"]["name"] for t in request.get("tools") or []]
    found = [m["content"] for m in messages if m.get("role") == "tool"]
    question = next(m["content"] for m in messages if m.get("role") == "user")
    if SEARCH in offered and not found:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": SEARCH, "arguments": json.dumps({"query": question})},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": "From the docs: " + " ".join(found)}
        finish = "stop"
    return {
        "id": "chatcmpl-docs-{}".format(len(messages)),
        "object": "chat.completion",
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 30 * len(messages),
            "completion_tokens": 10,
            "total_tokens": 30 * len(messages) + 10,
        },
    }


def respond(request, *, api="chat_completions", path="/v1/chat/completions"):
    """The scripted-model entry: the request body (and its API) -> the raw response body."""
    if api != "chat_completions":
        raise ValueError("this scripted model speaks Chat Completions only, not " + api)
    return json.dumps(chat_completion(request), indent=1)
