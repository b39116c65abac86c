"""A docs assistant: an agent program that starts its own MCP server (``docs_server.py``).

Program step entry point (``program: docs_agent:run``): called with the task input, returns the
answer text. It uses the ``mcp`` package's ``stdio_client`` with the same command as the
workflow's ``tools: [{mcp: {command: [...]}}]`` entry, offers the model the server's
``search_docs`` tool (the step declares ``docs.search_docs``; the model sees it as
``docs__search_docs``) and runs the model's tool calls through its MCP session. Nothing here
knows about sandbox-replay: in a sandbox the server's command reaches the runtime's stand-in
and the ``openai`` client reaches the sandbox's model gateway.
"""

import asyncio
import json
import os

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from openai import OpenAI

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "docs"
OFFERED = ["search_docs"]  # the only server tool this agent offers its model
SYSTEM = "You answer product questions from the documentation. Be brief."


def _schemas(listed):
    """Chat Completions ``tools`` for the offered MCP tools, named ``docs__NAME``."""
    return [
        {
            "type": "function",
            "function": {
                "name": "{}__{}".format(PREFIX, tool.name),
                "description": tool.description or "",
                "parameters": tool.input_schema,
            },
        }
        for tool in listed.tools
        if tool.name in OFFERED
    ]


def _text(result):
    """The text of an MCP ``tools/call`` result."""
    return "".join(getattr(part, "text", "") for part in result.content)


async def _answer(question, model, max_turns):
    params = StdioServerParameters(command="python3", args=["docs_server.py"], cwd=HERE)
    client = OpenAI()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = _schemas(await session.list_tools())
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ]
        for _ in range(max_turns):
            reply = client.chat.completions.create(
                model=model, messages=messages, tools=tools, temperature=0
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                name = call.function.name.split("__", 1)[-1]
                result = await session.call_tool(name, json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": _text(result)})
    raise RuntimeError("no answer after {} turns".format(max_turns))


def run(task_input, model="gpt-4.1-mini", max_turns=4):
    """Answer ``task_input["question"]`` (a dict with a ``question`` string); the answer text."""
    return asyncio.run(_answer(task_input["question"], model, max_turns))
