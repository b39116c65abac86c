"""A plain tool-calling loop on the official ``openai`` SDK: what many teams' agents look like.

Nothing in it knows about sandbox-replay beyond ``@tool`` functions: in production it talks to
OpenAI (or any endpoint ``OPENAI_BASE_URL`` names); in a sandbox the same code talks to the
model gateway the sandbox serves on its own loopback (``OPENAI_BASE_URL`` and a placeholder
``OPENAI_API_KEY`` are set there; the real key stays on the host).
"""

import json

from openai import OpenAI

from runner.sdk import function_name, tool_def


def tool_schemas(functions):
    """The Chat Completions ``tools`` of ``@tool`` functions, named as sandbox-replay does."""
    schemas = []
    for func in functions:
        definition = tool_def(func)
        schemas.append(
            {
                "type": "function",
                "function": {
                    "name": function_name(definition.id),
                    "description": definition.description,
                    "parameters": definition.schema,
                },
            }
        )
    return schemas


def run_loop(system, user, functions, model="gpt-4.1-mini", max_turns=6, client=None):
    """Ask the model until it answers without a tool call; return that answer's text."""
    client = client or OpenAI()
    by_name = {function_name(tool_def(f).id): f for f in functions}
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for _ in range(max_turns):
        reply = client.chat.completions.create(
            model=model, messages=messages, tools=tool_schemas(functions), temperature=0
        )
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                result = by_name[call.function.name](**json.loads(call.function.arguments))
                content = json.dumps(result)
            except Exception as exc:  # the model sees the error and may recover
                content = json.dumps({"error": "{}: {}".format(type(exc).__name__, exc)})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    raise RuntimeError("no answer after {} turns".format(max_turns))
