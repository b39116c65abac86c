"""In the worker a tool whose code may not run is never bound (runner.sdk.dispatch.withhold)."""

from __future__ import annotations

import gc
import inspect
from collections.abc import Iterator

import pytest

from runner import sdk
from runner.errors import CapabilityDenied
from runner.sdk import Effect, dispatch, tool


@pytest.fixture
def withholding() -> Iterator[None]:
    dispatch.deny_code(lambda tool_id: tool_id == "t.denied")
    try:
        yield
    finally:
        dispatch._WITHHOLD.clear()


def test_a_denied_tools_code_is_unreachable(withholding: None) -> None:
    ran: list[str] = []

    def launch(target: str, force: bool = False) -> str:
        ran.append(target)
        return "LAUNCHED"

    wrapper = tool("t.denied", effect=Effect.UNSAFE)(launch)
    bare_id = id(launch)
    del launch
    definition = sdk.tool_def(wrapper)
    assert definition is not None
    with pytest.raises(CapabilityDenied):
        definition.func("x")
    for cell in wrapper.__closure__ or ():
        if callable(cell.cell_contents) and cell.cell_contents is not definition:
            with pytest.raises(CapabilityDenied):
                cell.cell_contents("x")
    gc.collect()
    assert all(id(o) != bare_id for o in gc.get_objects() if inspect.isfunction(o))
    assert ran == []
    # a program's call still binds by name
    assert list(inspect.signature(definition.func).parameters) == ["target", "force"]


def test_an_allowed_tool_keeps_its_code(withholding: None) -> None:
    def add(x: int) -> int:
        return x + 1

    wrapper = tool("t.allowed", effect=Effect.PURE)(add)
    assert sdk.tool_def(wrapper).func is add  # type: ignore[union-attr]
