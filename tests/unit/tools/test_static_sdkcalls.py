"""Plain functions handed to an SDK's tool-making call are tools (runner/tools/static_sdkcalls.py).

LangGraph's quickstart hands a plain function to ``create_react_agent(model, tools=[f])``
inside the program; ``check`` reads it from source (no import: each module here marks its own
import) as a tool of that SDK, id the function's name (or a literal ``name=``), and the
sandbox's description (`runner.sdk.handed`, the runtime's ``manifest`` mode as a local
process) lists the same tool. What is handed over but not taken (a lambda, an imported
function, a non-literal name) is a gap of the registry; a function an SDK never sees is no
tool.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.domain.registry import Registry
from runner.sdk import handedscan
from tests.unit.tools.test_static import _described, _static  # the same oracle

pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("agents")
pytest.importorskip("anthropic")

FUNCTION = '''
def get_weather(city: str) -> str:
    """Get weather for a given city."""
    return city
'''


def _project(tmp_path: Path, source: str, extra: dict[str, str] | None = None) -> Path:
    marker = tmp_path / "IMPORTED"
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "agent.py").write_text(
        textwrap.dedent(source) + f"\nopen({str(marker)!r}, 'a').write('x')\n"
    )
    for name, text in (extra or {}).items():
        (folder / name).write_text(textwrap.dedent(text))
    (folder / "wf.yaml").write_text(
        "name: t\nversion: '1'\ntools: [agent]\nsteps:\n  - id: a\n    program: agent:run\n"
    )
    return folder / "wf.yaml"


def _view(registry: Registry) -> dict[str, tuple[object, ...]]:
    return {
        t.id: (t.framework, t.sdk_name, t.qualname, t.line, t.effect.value, t.declared_effect)
        for t in registry
    }


FORMS = {
    "create_react_agent keyword, in run": (
        "from langgraph.prebuilt import create_react_agent\n" + FUNCTION + "\n"
        "def run(task_input, model=None):\n"
        "    return create_react_agent(model, tools=[get_weather], prompt='p')\n",
        "get_weather",
        "langchain",
    ),
    "create_react_agent positional, aliased module": (
        "import langgraph.prebuilt as lp\n" + FUNCTION + "\n"
        "def run(task_input, model=None):\n"
        "    return lp.create_react_agent(model, [get_weather])\n",
        "get_weather",
        "langchain",
    ),
    "a list given by a name": (
        "from langgraph.prebuilt.chat_agent_executor import create_react_agent as cra\n"
        + FUNCTION
        + "\ndef run(task_input, model=None):\n"
        "    tools = [get_weather]\n"
        "    return cra(model, tools)\n",
        "get_weather",
        "langchain",
    ),
    "ToolNode at module level": (
        "from langgraph.prebuilt import ToolNode\n" + FUNCTION + "\n"
        "NODE = ToolNode([get_weather])\n"
        "def run(task_input):\n    return {}\n",
        "get_weather",
        "langchain",
    ),
    "bind_tools": (
        "from langchain_core.messages import HumanMessage\n" + FUNCTION + "\n"
        "def run(task_input, model=None):\n"
        "    return model.bind_tools([get_weather])\n",
        "get_weather",
        "langchain",
    ),
    "StructuredTool.from_function with a name": (
        "from langchain_core.tools import StructuredTool\n" + FUNCTION + "\n"
        "def run(task_input):\n"
        "    return StructuredTool.from_function(get_weather, name='weather_now')\n",
        "weather_now",
        "langchain",
    ),
    "tool(f) of langchain": (
        "from langchain_core.tools import tool\n" + FUNCTION + "\n"
        "def run(task_input):\n    return tool(get_weather)\n",
        "get_weather",
        "langchain",
    ),
    "function_tool(f), module attribute": (
        "import agents\n" + FUNCTION + "\n"
        "def run(task_input):\n    return agents.function_tool(get_weather)\n",
        "get_weather",
        "openai-agents",
    ),
    "function_tool(f) at module level, another name": (
        "from agents import function_tool\n" + FUNCTION + "\n"
        "weather = function_tool(get_weather, name_override='weather')\n"
        "def run(task_input):\n    return {}\n",
        "weather",
        "openai-agents",
    ),
    "beta_tool(f)": (
        "from anthropic import beta_tool\n" + FUNCTION + "\n"
        "def run(task_input):\n    return beta_tool(get_weather)\n",
        "get_weather",
        "anthropic",
    ),
}


@pytest.mark.parametrize("form", FORMS)
def test_each_form_is_a_tool_of_its_sdk_and_the_sandbox_agrees(tmp_path: Path, form: str) -> None:
    source, tool_id, framework = FORMS[form]
    workflow = _project(tmp_path, source)
    static = _static(workflow)
    assert static.ids() == [tool_id], static.unread
    tool = static.resolve(tool_id)
    assert (tool.framework, tool.sdk_name, tool.effect.value, tool.declared_effect) == (
        framework,
        tool_id,
        "unsafe",
        None,
    )
    assert tool.unread is None and tool.description == "Get weather for a given city."
    described = _described(tmp_path, workflow)
    assert _view(described) == _view(static)
    assert described.resolve(tool_id).schema["properties"]["city"]["type"] == "string"


def test_a_declared_function_handed_over_keeps_its_declaration(tmp_path: Path) -> None:
    source = (
        "from langgraph.prebuilt import create_react_agent\n"
        "from runner.sdk import Effect, tool\n"
        "@tool('weather.get', effect=Effect.READ)" + FUNCTION + "\n"
        "def run(task_input, model=None):\n"
        "    return create_react_agent(model, tools=[get_weather])\n"
    )
    workflow = _project(tmp_path, source)
    static = _static(workflow)
    assert _view(static) == {"weather.get": (None, None, "get_weather", 3, "read", "read")}
    assert _view(_described(tmp_path, workflow)) == _view(static)


NEGATIVES = {
    "a lambda": (
        "from langgraph.prebuilt import create_react_agent\n"
        "def run(task_input, model=None):\n"
        "    return create_react_agent(model, tools=[lambda city: city])\n",
        "a lambda (a tool needs a named function): handed to an SDK's tool-making call at",
    ),
    "a function imported from another module": (
        "from langgraph.prebuilt import create_react_agent\n"
        "from helpers import get_weather\n"
        "def run(task_input, model=None):\n"
        "    return create_react_agent(model, tools=[get_weather])\n",
        "function get_weather is imported from helpers",
    ),
    "a name that is not literal": (
        "from langchain_core.tools import StructuredTool\n" + FUNCTION + "\nNAME = 'w'\n"
        "def run(task_input):\n"
        "    return StructuredTool.from_function(get_weather, name=NAME.upper())\n",
        "function get_weather: its tool name is not a literal at",
    ),
}


@pytest.mark.parametrize("case", NEGATIVES)
def test_what_is_handed_over_but_not_taken_is_a_gap_and_no_tool(tmp_path: Path, case: str) -> None:
    source, gap = NEGATIVES[case]
    helper = {"helpers.py": FUNCTION}  # its own module hands nothing over: no tool there
    workflow = _project(tmp_path, source, helper)
    static = _static(workflow)
    assert static.ids() == [] and any(gap in g for g in static.unread), static.unread
    assert _described(tmp_path, workflow).ids() == []


@pytest.mark.parametrize(
    "source",
    [
        # the same call without the SDK's import: a function of the user's own
        FUNCTION + "\ndef create_react_agent(model, tools):\n    return tools\n"
        "def run(task_input):\n    return create_react_agent(None, tools=[get_weather])\n",
        # a local name shadowing the module's function
        "from langgraph.prebuilt import create_react_agent\n" + FUNCTION + "\n"
        "def run(task_input, get_weather=None):\n"
        "    return create_react_agent(None, tools=[get_weather])\n",
        # defined, never handed over
        "from langgraph.prebuilt import create_react_agent\n" + FUNCTION + "\n"
        "def run(task_input):\n    return create_react_agent(None, tools=[])\n",
    ],
    ids=["no SDK import", "a local name", "never handed"],
)
def test_a_function_no_sdk_is_given_is_no_tool(tmp_path: Path, source: str) -> None:
    workflow = _project(tmp_path, source)
    assert _static(workflow).ids() == []
    assert _described(tmp_path, workflow).ids() == []


def test_a_function_rebound_after_its_definition_is_not_taken(tmp_path: Path) -> None:
    source = (
        "from langgraph.prebuilt import create_react_agent\n" + FUNCTION + "\n"
        "get_weather = print\n"
        "def run(task_input):\n    return create_react_agent(None, tools=[get_weather])\n"
    )
    workflow = _project(tmp_path, source)
    assert _static(workflow).ids() == [] and _described(tmp_path, workflow).ids() == []


def test_the_scan_keeps_one_tool_per_function_the_module_level_object_first() -> None:
    import ast

    tree = ast.parse(
        "from agents import function_tool\nimport agents\n" + FUNCTION + "\n"
        "def run():\n    agents.function_tool(get_weather)\n"
        "SEARCH = function_tool(get_weather)\n"
    )
    found = handedscan.scan(tree)
    assert [(h.function, h.bound, h.framework) for h in found.handed] == [
        ("get_weather", ("SEARCH",), "openai-agents")
    ]
