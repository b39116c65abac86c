"""A scripted model for the support agent: deterministic and offline, run on the host.

A scripted model is called as ``respond(request, *, api, path)``: the request body the program
sent, and the API and path it was sent on (keywords a function declares when it wants them); it
returns the raw response body, as text or a dict. This one speaks Chat Completions (the
``openai`` SDK's ``chat.completions.create``): it calls the tools it is offered in the order
ticket -> knowledge base -> format, then answers with what they returned. Swap it for a real
model with ``model: {provider: openai, name: gpt-4.1-mini}`` (key on the host).
"""

import json
import re

MODEL_ID = "support-script-2026-01"
TICKET = re.compile(r"^Ticket (T-\d+): (.*)$", re.S)


def _results(messages):
    """``{function name: parsed result}`` of the tool results in ``messages``."""
    names = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
    found = {}
    for message in messages:
        if message.get("role") == "tool":
            found[names.get(message.get("tool_call_id"), "?")] = json.loads(message["content"])
    return found


def chat_completion(request):
    """The Chat Completions response (a dict) to ``request``."""
    messages = request.get("messages") or []
    offered = [t["function"]["name"] for t in request.get("tools") or []]
    results = _results(messages)
    user = next(m["content"] for m in messages if m.get("role") == "user")
    match = TICKET.match(user)
    question = match.group(2) if match else user
    call = None
    if "ticket__get" in offered and "ticket__get" not in results and match:
        call = ("ticket__get", {"ticket_id": match.group(1)})
    elif "kb__search" in offered and "kb__search" not in results:
        call = ("kb__search", {"query": question})
    hits = (results.get("kb__search") or {}).get("hits") or []
    advice = hits[0]["advice"] if hits else "No article fits; a colleague will follow up."
    customer = (results.get("ticket__get") or {}).get("customer")
    if call is None and "reply__format" in offered and "reply__format" not in results and customer:
        call = ("reply__format", {"customer": customer, "body": advice})
    if call is not None:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_{}".format(len(results) + 1),
                    "type": "function",
                    "function": {"name": call[0], "arguments": json.dumps(call[1])},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": results.get("reply__format") or advice}
        finish = "stop"
    return {
        "id": "chatcmpl-support-{}".format(len(messages)),
        "object": "chat.completion",
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 40 * len(messages),
            "completion_tokens": 12,
            "total_tokens": 40 * len(messages) + 12,
        },
    }


def respond(request, *, api="chat_completions", path="/v1/chat/completions"):
    """The scripted-model entry: the request body (and its API) -> the raw response body."""
    if api != "chat_completions":
        raise ValueError("this scripted model speaks Chat Completions only, not " + api)
    return json.dumps(chat_completion(request), indent=1)
