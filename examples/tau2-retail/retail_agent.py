"""A small scripted retail agent for the imported τ²-bench tasks: deterministic, no network.

`respond` (v1) and `respond_v2` answer OpenAI Chat Completions requests on the host (the
``scripted`` provider). The agent reads the customer's scenario (the first user message: the
task's ``instructions`` as JSON), authenticates the customer with a read tool, then looks
things up; it never calls a write tool:

1. an email in the scenario -> ``find_user_id_by_email``; else a first and last name and a
   five-digit zip (a user id such as ``mei_kovacs_8020`` gives the name) ->
   ``find_user_id_by_name_zip``; neither -> it answers that it cannot authenticate;
2. the user id found -> ``get_user_details``;
3. the user's orders -> ``get_order_details`` for each (several calls in one message);
4. v2 only: the products of those orders -> ``get_product_details`` for each distinct one;
5. a final answer listing what it found.

A tool result that is an error (a recorded ``Error: ...`` text, or a read with no recording,
which the sandbox reports as ``{"error": ...}``) is skipped; the agent goes on with what it has.
"""

import json
import re
from typing import Any, Dict, List, Optional, Tuple

MODEL_ID = "retail-scripted-2026-11"
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_USER_ID = re.compile(r"\b([a-z]+)_([a-z]+)_\d{4}\b")
_NAME = re.compile(
    r"(?:name is|You are|called|I am)\s+(?:an? [a-z ]+ called\s+)?([A-Z][a-z]+)\s+([A-Z][a-z]+)"
)
_ZIP = re.compile(r"\b(\d{5})\b")


def _scenario(messages: List[Dict[str, Any]]) -> str:
    first = next((m for m in messages if m.get("role") == "user"), None)
    text = str(first.get("content") or "") if first else ""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        return " ".join(str(v) for v in data.values() if v)
    return text


def identify(scenario: str) -> Optional[Tuple[str, Dict[str, str]]]:
    """The authentication call for a scenario text: (tool, args), or None."""
    email = _EMAIL.search(scenario)
    if email:
        return "find_user_id_by_email", {"email": email.group(0)}
    zip_code = _ZIP.search(scenario)
    if not zip_code:
        return None
    user_id = _USER_ID.search(scenario)
    name = _NAME.search(scenario)
    if name:
        first, last = name.group(1), name.group(2)
    elif user_id:
        first, last = user_id.group(1).capitalize(), user_id.group(2).capitalize()
    else:
        return None
    return "find_user_id_by_name_zip", {
        "first_name": first,
        "last_name": last,
        "zip": zip_code.group(1),
    }


def _json(text: Any) -> Any:
    try:
        return json.loads(str(text))
    except ValueError:
        return None


def _failed(content: Any) -> bool:
    text = str(content or "")
    data = _json(text)
    return text.startswith("Error") or (isinstance(data, dict) and "error" in data)


def _results(messages: List[Dict[str, Any]]) -> Dict[str, List[Any]]:
    """Successful tool results by tool name, in order (matched to calls by call id)."""
    names: Dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
    out: Dict[str, List[Any]] = {}
    for m in messages:
        if m.get("role") == "tool" and not _failed(m.get("content")):
            out.setdefault(names.get(m.get("tool_call_id"), ""), []).append(m.get("content"))
    return out


def _calls(tool: str, args_list: List[Dict[str, Any]], step: int) -> Dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_{}_{}".format(step, i),
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(args)},
            }
            for i, args in enumerate(args_list)
        ],
    }


def _next_message(request: Dict[str, Any], with_products: bool) -> Dict[str, Any]:
    messages = request["messages"]
    offered = {t["function"]["name"] for t in request.get("tools") or []}
    step = sum(1 for m in messages if m.get("role") == "assistant")
    called = {c["function"]["name"] for m in messages for c in (m.get("tool_calls") or [])}
    got = _results(messages)
    if step == 0:
        found = identify(_scenario(messages))
        if found is None or found[0] not in offered:
            return {"role": "assistant", "content": "I cannot authenticate you from this."}
        return _calls(found[0], [found[1]], step)
    user_ids = got.get("find_user_id_by_email", []) + got.get("find_user_id_by_name_zip", [])
    if "get_user_details" not in called:
        if not user_ids:
            return {"role": "assistant", "content": "I could not find your account."}
        return _calls("get_user_details", [{"user_id": str(user_ids[0])}], step)
    details = [_json(d) for d in got.get("get_user_details", [])]
    orders = [o for d in details if isinstance(d, dict) for o in d.get("orders") or []]
    if orders and "get_order_details" not in called:
        return _calls("get_order_details", [{"order_id": o} for o in orders], step)
    found_orders = [_json(o) for o in got.get("get_order_details", [])]
    found_orders = [o for o in found_orders if isinstance(o, dict)]
    products: List[str] = []
    for order in found_orders:
        for item in order.get("items") or []:
            pid = str(item.get("product_id"))
            if pid not in products:
                products.append(pid)
    wants_products = with_products and "get_product_details" in offered
    if wants_products and products and "get_product_details" not in called:
        return _calls("get_product_details", [{"product_id": p} for p in products], step)
    lines = [
        "Account {}: {} order(s) on file.".format(user_ids[0] if user_ids else "?", len(orders))
    ]
    for order in found_orders:
        items = ", ".join(str(i.get("name")) for i in order.get("items") or [])
        lines.append("{} ({}): {}".format(order.get("order_id"), order.get("status"), items))
    if wants_products:
        lines.append("{} product(s) looked up.".format(len(got.get("get_product_details", []))))
    return {"role": "assistant", "content": "\n".join(lines)}


def _completion(request: Dict[str, Any], message: Dict[str, Any]) -> Dict[str, Any]:
    prompt = sum(len(str(m.get("content") or "").split()) + 4 for m in request["messages"])
    completion = len(json.dumps(message).split())
    return {
        "id": "chatcmpl-retail-{}".format(len(request["messages"])),
        "object": "chat.completion",
        "model": MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def respond(request: Dict[str, Any]) -> Dict[str, Any]:
    """v1: authenticate, then the user's details and orders."""
    return _completion(request, _next_message(request, with_products=False))


def respond_v2(request: Dict[str, Any]) -> Dict[str, Any]:
    """v2: as v1, then the products of the orders it found."""
    return _completion(request, _next_message(request, with_products=True))
