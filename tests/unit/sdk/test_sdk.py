"""runner.sdk: effect classes, @tool, schema derivation and hash, the replay-context guard.

The annotations below deliberately use the typing spellings (List, Dict, Optional, Union) and
real annotation objects (no ``from __future__ import annotations``): the SDK must handle both.
"""

# ruff: noqa: UP006, UP007, UP035, UP045, RUF013

import json
import subprocess
import sys
import textwrap
import threading
import types
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

import pytest

from runner.errors import CapabilityDenied, InputError
from runner.sdk import (
    Effect,
    ToolDefinitionError,
    canonical_json,
    collect_tools,
    derive_schema,
    replay_context,
    schema_hash,
    tool,
    tool_def,
)
from tests.support.paths import REPO

PY39 = "/root/.pyenv/versions/3.9.18/bin/python"
ROOT = REPO


class Address(TypedDict):
    street: str
    zip: int


class Filters(TypedDict, total=False):
    status: Literal["open", "closed"]
    tags: List[str]


def test_effect_classes_are_the_four_of_the_spec() -> None:
    assert [e.value for e in Effect] == ["pure", "read", "local", "unsafe"]


def test_tool_without_effect_counts_as_unsafe_and_says_so() -> None:
    @tool("x.y")
    def f(a: int) -> int:
        return a

    definition = tool_def(f)
    assert definition is not None
    assert definition.effect is Effect.UNSAFE
    assert definition.effect_declared is False


def test_effect_given_as_text_is_accepted_and_unknown_text_is_an_error() -> None:
    @tool("x.y", effect="read")  # type: ignore[arg-type]
    def f(a: int) -> int:
        return a

    assert tool_def(f).effect is Effect.READ  # type: ignore[union-attr]
    with pytest.raises(ToolDefinitionError, match="unknown effect class 'write'"):
        tool("x.y", effect="write")  # type: ignore[arg-type]


def test_schema_covers_every_supported_type() -> None:
    def f(
        s: str,
        i: int,
        x: float,
        b: bool,
        n: None,
        items: List[str],
        counts: Dict[str, int],
        maybe: Optional[int],
        either: Union[int, str],
        mode: Literal["a", "b"],
        address: Address,
        filters: Filters,
        nested: list[dict[str, list[int]]],
        opt: str = "x",
    ) -> None: ...

    schema = derive_schema(f)
    props = schema["properties"]
    assert props["s"] == {"type": "string"}
    assert props["i"] == {"type": "integer"}
    assert props["x"] == {"type": "number"}
    assert props["b"] == {"type": "boolean"}
    assert props["n"] == {"type": "null"}
    assert props["items"] == {"type": "array", "items": {"type": "string"}}
    assert props["counts"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert props["either"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["mode"] == {"enum": ["a", "b"]}
    assert props["address"] == {
        "type": "object",
        "properties": {"street": {"type": "string"}, "zip": {"type": "integer"}},
        "required": ["street", "zip"],
        "additionalProperties": False,
    }
    assert props["filters"]["required"] == []
    assert props["filters"]["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["nested"]["items"]["additionalProperties"]["items"] == {"type": "integer"}
    assert schema["required"] == sorted(set(props) - {"opt"})
    assert schema["additionalProperties"] is False


class Opaque:
    pass


@pytest.mark.parametrize(
    ("annotation", "needle"),
    [
        ("Any", "not supported"),
        ("tuple", "not supported"),
        ("set", "not supported"),
        ("Opaque", "not supported"),
        ("Dict[int, str]", "dict[str, T]"),
        ("list", "item type"),
        ("Literal[1.5]", "Literal values"),
    ],
)
def test_unsupported_type_is_an_error_naming_function_and_parameter(
    annotation: str, needle: str
) -> None:
    namespace: dict[str, Any] = {"Opaque": Opaque}
    source = f"def lookup(when: {annotation}) -> None: ...\n"
    # builds a function with the given annotation
    exec("from typing import *\n" + source, namespace)
    with pytest.raises(ToolDefinitionError) as info:
        tool("x.lookup", effect=Effect.PURE)(namespace["lookup"])
    message = str(info.value)
    assert "lookup" in message
    assert "'when'" in message
    assert needle in message


def test_bad_signatures_are_errors_at_decoration_time() -> None:
    def no_hint(a, b: int) -> None:  # type: ignore[no-untyped-def]
        ...

    def var_args(*names: str) -> None: ...

    def positional(a: int, /) -> None: ...

    for func, needle in [
        (no_hint, "needs a type hint"),
        (var_args, r"\*args"),
        (positional, "positional-only"),
    ]:
        with pytest.raises(ToolDefinitionError, match=needle):
            tool("x.y", effect=Effect.PURE)(func)


def test_unresolvable_annotation_names_the_parameter() -> None:
    def f(a: int, b: "NoSuchType") -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ToolDefinitionError, match=r"parameter 'b'.*NoSuchType"):
        tool("x.y", effect=Effect.PURE)(f)


def test_definition_errors_are_input_errors_exit_2() -> None:
    with pytest.raises(InputError) as info:
        tool("not a valid id")
    assert info.value.exit_code == 2


def test_bare_decorator_is_explained() -> None:
    with pytest.raises(ToolDefinitionError, match="needs a tool id"):

        @tool  # type: ignore[arg-type]
        def f(a: int) -> int:
            return a


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", "ticket get", "tické.get", "a/b", 7])
def test_invalid_tool_ids(bad: Any) -> None:
    with pytest.raises(ToolDefinitionError):
        tool(bad, effect=Effect.PURE)


def test_schema_hash_is_stable_across_key_order() -> None:
    a = {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "integer"}}}
    b = {"properties": {"y": {"type": "integer"}, "x": {"type": "string"}}, "type": "object"}
    assert schema_hash(a) == schema_hash(b)
    assert canonical_json(a) == canonical_json(b)
    assert " " not in canonical_json(a)


def test_schema_hash_changes_with_a_parameter_type_and_not_with_the_description() -> None:
    @tool("t.a", effect=Effect.PURE, description="first words")
    def a(ticket_id: str) -> None: ...

    @tool("t.a", effect=Effect.PURE, description="completely different words")
    def b(ticket_id: str) -> None: ...

    @tool("t.a", effect=Effect.PURE, description="first words")
    def c(ticket_id: int) -> None: ...

    hash_a, hash_b, hash_c = (tool_def(f).schema_hash for f in (a, b, c))  # type: ignore[union-attr]
    assert hash_a == hash_b
    assert hash_a != hash_c


def test_schema_hash_ignores_parameter_order_and_union_order() -> None:
    def one(a: Union[int, str], b: str) -> None: ...

    def two(b: str, a: Union[str, int]) -> None: ...

    assert schema_hash(derive_schema(one)) == schema_hash(derive_schema(two))


def test_none_default_means_optional_on_every_python() -> None:
    def implicit(a: str = None) -> None: ...  # type: ignore[assignment]

    def explicit(a: Optional[str] = None) -> None: ...

    assert derive_schema(implicit) == derive_schema(explicit)
    assert derive_schema(implicit)["properties"]["a"] == {
        "anyOf": [{"type": "null"}, {"type": "string"}]
    }


_HASH_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path[:0] = [{root!r}, {fixtures!r}]
    import hd_tools
    from typing import Union
    from runner.sdk import collect_tools, derive_schema, schema_hash
    def implicit(a: str = None, b: Union[str, int] = 1, c: "list[int]" = None): ...
    hashes = {{d.id: d.schema_hash for d in collect_tools(hd_tools)}}
    hashes["implicit"] = schema_hash(derive_schema(implicit))
    print(json.dumps(hashes, sort_keys=True))
    """
)


def test_schema_hash_is_the_same_in_other_processes_and_on_python_39() -> None:
    fixtures = ROOT / "tests" / "fixtures" / "helpdesk"
    script = _HASH_SCRIPT.format(root=str(ROOT), fixtures=str(fixtures))
    results = []
    for python, seed in [(sys.executable, "1"), (sys.executable, "2"), (PY39, "3")]:
        done = subprocess.run(
            [python, "-c", script],
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            check=True,
            timeout=60,
        )
        results.append(json.loads(done.stdout))
    assert results[0] == results[1] == results[2]
    assert len(results[0]) == 8


def test_replay_context_denies_direct_calls_and_executes_nothing() -> None:
    ran: list[str] = []

    @tool("mail.send", effect=Effect.UNSAFE)
    def send(to: str) -> str:
        ran.append(to)
        return "sent"

    @tool("text.upper", effect=Effect.PURE)
    def upper(text: str) -> str:
        return text.upper()

    with replay_context({"text.upper"}):
        assert upper(text="a") == "A"
        with pytest.raises(CapabilityDenied, match=r"mail\.send") as info:
            send(to="ceo@example.com")
        assert info.value.exit_code == 3
        assert info.value.fields == {"tool_id": "mail.send", "effect": "unsafe"}
    assert ran == []
    assert send(to="me") == "sent"  # outside any replay context: a plain function
    assert ran == ["me"]


def test_replay_context_covers_threads_and_nests() -> None:
    ran: list[str] = []

    @tool("mail.send", effect=Effect.UNSAFE)
    def send(to: str) -> None:
        ran.append(to)

    errors: list[BaseException] = []

    def in_thread() -> None:
        try:
            send(to="x")
        except CapabilityDenied as exc:
            errors.append(exc)

    with replay_context(set()):
        thread = threading.Thread(target=in_thread)
        thread.start()
        thread.join()
        with replay_context({"mail.send"}):
            send(to="inner")
        with pytest.raises(CapabilityDenied):
            send(to="outer")
    assert ran == ["inner"]
    assert len(errors) == 1


def test_guard_leaves_no_unguarded_path_but_keeps_the_signature() -> None:
    import inspect

    @tool("mail.send", effect=Effect.UNSAFE)
    def send(to: str, cc: Optional[str] = None) -> None: ...

    assert not hasattr(send, "__wrapped__")
    assert list(inspect.signature(send).parameters) == ["to", "cc"]
    assert send.__name__ == "send"


def test_collect_tools_in_order_own_tools_only_and_aliases_importable() -> None:
    module = types.ModuleType("fake_tools")
    code = textwrap.dedent(
        """
        from runner.sdk import Effect, tool
        from tests_fixture_elsewhere import borrowed

        @tool("b.second", effect=Effect.PURE)
        def second(x: int) -> int:
            return x

        def _impl(x: int) -> int:
            return x

        first = tool("a.first", effect=Effect.PURE)(_impl)
        """
    )
    elsewhere = types.ModuleType("tests_fixture_elsewhere")

    @tool("z.borrowed", effect=Effect.PURE)
    def borrowed(x: int) -> int:
        return x

    elsewhere.borrowed = borrowed  # type: ignore[attr-defined]
    sys.modules["tests_fixture_elsewhere"] = elsewhere
    try:
        exec(compile(code, "fake_tools.py", "exec"), module.__dict__)
    finally:
        del sys.modules["tests_fixture_elsewhere"]
    found = collect_tools(module)
    assert [d.id for d in found] == ["b.second", "a.first"]  # definition order by line
    aliased = found[1]
    assert aliased.qualname == "first"
    assert tool_def(getattr(module, aliased.qualname)) is aliased
