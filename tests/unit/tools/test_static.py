"""``check`` reads tool modules from source (runner/tools/static*.py): no import.

Every form `runner.sdk.tool` accepts literally is read to the same id, effect, qualname, line
and schema hash the runtime's own description gives (the oracle: the runtime's ``manifest``
mode, run as a local process over these trusted modules); what is not literal is ``unsafe``
with the reason and its place (fail closed); a declaration the runtime refuses is the same
input error. Nothing of the module runs: each module here would write a marker if it did.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.admission.describe import sandbox_registry
from runner.admission.eligibility import check_eligibility
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.domain.registry import Registry
from runner.domain.workflow import load_workflow
from runner.errors import InputError
from runner.policy import load_policy
from runner.settings import Settings
from runner.tools.static import HostSyntaxError, read_function, static_registry


def _project(tmp_path: Path, source: str, steps: str = "x.y") -> Path:
    """A workflow over module ``tools`` (``source``, which marks its own import)."""
    marker = tmp_path / "IMPORTED"
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "tools.py").write_text(
        textwrap.dedent(source) + f"\nopen({str(marker)!r}, 'a').write('x')\n"
    )
    (folder / "wf.yaml").write_text(
        "name: t\nversion: '1'\ntools: [tools]\nsteps:\n"
        + "".join(f"  - id: s{i}\n    tool: {t}\n" for i, t in enumerate(steps.split()))
    )
    return folder / "wf.yaml"


def _static(workflow: Path) -> Registry:
    registry = static_registry(load_workflow(workflow))
    assert not (workflow.parent.parent / "IMPORTED").exists(), "the module ran on the host"
    return registry


def _described(tmp_path: Path, workflow: Path) -> Registry:
    return sandbox_registry(
        load_workflow(workflow),
        backend=UnsandboxedProcessBackend(),
        settings=Settings(state_dir=tmp_path / "state"),
        image="img",
        policy=load_policy("shadow"),
    )


def _view(registry: Registry) -> dict[str, tuple[object, ...]]:
    return {
        t.id: (t.effect.value, t.declared_effect, t.schema_hash, t.qualname, t.line, t.description)
        for t in registry
    }


LITERAL_FORMS = '''
from __future__ import annotations
import typing
import typing as t
import runner.sdk
import runner.sdk as sdk_alias
from runner import sdk
from runner.sdk import Effect, tool
from runner.sdk import Effect as E, tool as declare
from typing import Annotated, Dict, List, Literal, Optional, TypedDict, Union

PREFIX_ID = "consts.id"
READ = Effect.READ
LIMIT = 5
Query = List[str]

class Base(TypedDict):
    a: int
    tags: "List[str]"

class Ticket(Base, total=False):
    """A ticket."""
    note: Optional[str]

Point = TypedDict("Point", {"x": float, "y": float}, total=False)

@tool("a.positional", "read", "Given by position.")
def positional(q: str, n: int = 3) -> dict:
    return {}

@declare(tool_id="a.keywords", effect=E.PURE)
def keywords(*, q: "Query", flag: bool = False) -> list:
    """First line of the doc.

    More."""
    return []

@sdk.tool("a.module_attr", effect=sdk.Effect("local"))
def module_attr(t1: Ticket, p: Point | None = None) -> str:
    return ""

@runner.sdk.tool("a.dotted", effect=runner.sdk.Effect.UNSAFE)
def dotted(x: Union[int, str], y: t.Dict[str, t.List[int]]) -> str:
    return ""

@sdk_alias.tool(PREFIX_ID, effect=READ, description="")
def consts(mode: Literal["a", "b", "a", 1, True] = "a", limit: int = LIMIT) -> str:
    return ""

@tool("a.annotated", effect=Effect.PURE)
async def annotated(text: Annotated[str, "meta"], items: list[dict[str, int]], z: None = None):
    return None

@tool("a.undeclared")
def undeclared(value: typing.Optional[float] = None) -> None:
    return None

def _impl(a: int, b: int) -> int:
    return a + b

add = tool("a.call_form", effect=Effect.PURE)(_impl)
plus = add
lam = tool("a.lambda", effect=Effect.PURE)(lambda: 1)

@tool("a.rebound", effect=Effect.PURE)
def rebound() -> int:
    return 1
rebound = 5

@tool("a.deleted", effect=Effect.PURE)
def deleted() -> int:
    return 1
del deleted

if __name__ == "__main__":
    positional = None

if typing.TYPE_CHECKING:
    keywords = None
'''


def test_every_literal_form_reads_as_the_runtime_describes_it(tmp_path: Path) -> None:
    workflow = _project(tmp_path, LITERAL_FORMS)
    static = _static(workflow)
    assert all(tool.unread is None for tool in static), [t.unread for t in static]
    assert "a.rebound" not in static and "a.deleted" not in static  # no module name holds them
    described = _described(tmp_path, workflow)
    assert _view(static) == _view(described)
    assert static.resolve("a.call_form").qualname == "add"  # _impl's tool is bound as add, plus
    assert static.resolve("a.lambda").qualname == "lam"
    assert static.resolve("a.keywords").description == "First line of the doc."


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        (
            "import os\nfrom runner.sdk import tool\n"
            '@tool("n.effect", effect=os.environ.get("EFFECT", "pure"))\n'
            "def f() -> int:\n    return 1\n",
            "effect given by a non-literal expression",
        ),
        (
            "from runner.sdk import tool, Effect\nfrom models import Ticket\n"
            '@tool("n.effect", effect=Effect.PURE)\ndef f(t: Ticket) -> int:\n    return 1\n',
            "parameter 't' has a type the reading does not follow (Ticket is imported from models",
        ),
        (
            'import os\nfrom runner.sdk import tool, Effect\nD = os.environ.get("D")\n'
            '@tool("n.effect", effect=Effect.PURE)\ndef f(x: int = D) -> int:\n    return 1\n',
            "the default of parameter 'x' is not a literal",
        ),
        (
            'import os\nfrom runner.sdk import tool, Effect\nif os.environ.get("X"):\n'
            '    @tool("n.effect", effect=Effect.PURE)\n    def f() -> int:\n        return 1\n',
            "it is defined under the condition at ",
        ),
        (
            "import functools\nfrom runner.sdk import tool, Effect\n@functools.lru_cache\n"
            '@tool("n.effect", effect=Effect.PURE)\ndef f() -> int:\n    return 1\n',
            "it has decorators besides runner.sdk.tool",
        ),
        (
            'from runner.sdk import tool, Effect\n@tool("n.effect", effect=Effect.PURE)\n'
            "def f() -> int:\n    return 1\ndef g():\n    global f\n    f = None\n",
            "function g may rebind it",
        ),
        (
            'from runner.sdk import tool, Effect\n@tool("n.effect", effect=Effect.PURE)\n'
            'def f() -> int:\n    return 1\nglobals()["f"] = None\n',
            "the module may rewrite its own namespace (globals()",
        ),
    ],
)
def test_what_is_not_literal_is_unsafe_and_says_why_and_where(
    tmp_path: Path, source: str, needle: str
) -> None:
    workflow = _project(tmp_path, source, steps="n.effect")
    tool = _static(workflow).resolve("n.effect")
    assert tool.effect.value == "unsafe" and tool.unread is not None
    assert needle in tool.unread, tool.unread
    assert "tools.py:" in tool.unread  # the place is named
    report = check_eligibility([workflow], "shadow")
    [problem] = report.problems
    assert report.exit_code == 3 and not problem.decided
    assert f"is unsafe (read without importing it: {tool.unread})" in problem.message


def test_an_id_that_is_not_literal_is_a_gap_named_when_a_step_does_not_resolve(
    tmp_path: Path,
) -> None:
    source = (
        'from runner.sdk import tool, Effect\nNAME = "n" + ".dyn"\n'
        "@tool(NAME, effect=Effect.PURE)\ndef f() -> int:\n    return 1\n"
        "def register(fn):\n    return fn\n@register\ndef g() -> int:\n    return 2\n"
    )
    workflow = _project(tmp_path, source, steps="n.dyn")
    registry = _static(workflow)
    assert len(registry) == 0
    [problem] = check_eligibility([workflow], "shadow").problems
    assert problem.kind == "unresolvable" and not problem.decided
    assert "a tool id given by a non-literal expression" in problem.message
    assert "function g at project/tools.py:8 has a decorator" in problem.message or (
        "function g at" in problem.message
    )


@pytest.mark.parametrize(
    ("decorator", "parameters", "needle"),
    [
        ("@tool", "", "needs a tool id"),
        ('@tool("bad id!")', "", "invalid tool id"),
        ('@tool("a.b", effect="reads")', "", "unknown effect class"),
        ('@tool("a.b", effect="pure")', "x", "needs a type hint"),
        ('@tool("a.b", effect="pure")', "*a: int", "*args and **kwargs"),
        ('@tool("a.b", effect="pure")', "x: int, /", "positional-only"),
        ('@tool("a.b", effect="pure")', "x: set", "is not supported"),
        ('@tool("a.b", effect="pure")', "x: List", "list needs its item type"),
        ('@tool("a.b", colour="red")', "", "TypeError"),
    ],
)
def test_a_declaration_the_runtime_refuses_is_the_same_input_error(
    tmp_path: Path, decorator: str, parameters: str, needle: str
) -> None:
    source = (
        f"from typing import List\nfrom runner.sdk import tool\n{decorator}\n"
        f"def f({parameters}) -> int:\n    return 1\n"
    )
    workflow = _project(tmp_path, source, steps="a.b")
    with pytest.raises(InputError) as static:
        _static(workflow)
    with pytest.raises(InputError) as described:
        _described(tmp_path, workflow)
    assert needle in str(static.value) and needle in str(described.value)
    assert static.value.fields["field"] == described.value.fields["field"] == "tools[0]"


def test_a_syntax_error_is_invalid_input_for_check_but_left_to_the_sandbox(tmp_path: Path) -> None:
    workflow = _project(tmp_path, "def broken(:\n    pass\n")
    with pytest.raises(HostSyntaxError, match=r"syntax error in .*tools.py:1"):
        _static(workflow)
    [problem] = check_eligibility([workflow], "shadow").problems
    assert problem.kind == "invalid" and problem.exit_code == 2 and not problem.decided


def test_duplicate_ids_name_both_definitions(tmp_path: Path) -> None:
    source = (
        'from runner.sdk import tool\n@tool("a.b", effect="pure")\ndef f() -> int:\n    return 1\n'
        '@tool("a.b", effect="pure")\ndef g() -> int:\n    return 1\n'
    )
    with pytest.raises(InputError, match=r"'a.b' is defined twice: .*tools.py:2 and .*tools.py:5"):
        _static(_project(tmp_path, source, steps="a.b"))


def test_a_scripted_model_function_is_found_without_importing(tmp_path: Path) -> None:
    marker = tmp_path / "RAN"
    (tmp_path / "model.py").write_text(
        f"open({str(marker)!r}, 'w')\nimport json\ndef respond(request):\n    return {{}}\n"
        "try:\n    from fast import other\nexcept ImportError:\n    other = respond\n"
    )
    read_function("model:respond", [tmp_path])
    read_function("model:other", [tmp_path])
    read_function("model:json", [tmp_path])
    with pytest.raises(InputError, match="no attribute 'nope'"):
        read_function("model:nope", [tmp_path])
    with pytest.raises(InputError, match="No module named 'absent'"):
        read_function("absent:respond", [tmp_path])
    assert not marker.exists()
