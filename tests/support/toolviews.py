"""What the static reading and the sandbox's description of a workflow's tools must agree on.

Used by tests/unit/tools/test_static_agreement.py (the runtime's description as a local
process)
and tests/integration/test_static_agreement_docker.py (inside Docker sandboxes).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.domain.registry import Registry
from runner.domain.workflow import load_workflow
from runner.errors import InputError
from runner.tools.locate import locate_tools
from runner.tools.static import static_registry

ROOT = Path(__file__).resolve().parents[2]

# tool modules of the fixtures that no fixture workflow names: described through a workflow
# written next to a copy of the module
LONE_MODULES = (
    ROOT / "tests" / "fixtures" / "attacks" / "hostile_tools.py",
    ROOT / "tests" / "fixtures" / "runtime" / "tools" / "rt_tools.py",
    ROOT / "tests" / "fixtures" / "golden" / "loopback.py",
)


def example_and_fixture_workflows() -> list[Path]:
    """Every workflow file of examples/* and tests/fixtures/** that loads."""
    found = sorted(ROOT.glob("examples/*/*.yaml")) + sorted(ROOT.glob("tests/fixtures/**/*.yaml"))
    loaded = []
    for path in found:
        try:
            load_workflow(path)
        except InputError:
            continue  # not a workflow (job files) or invalid on purpose: nothing to describe
        loaded.append(path)
    return loaded


def lone_module_workflow(module: Path, folder: Path) -> Path:
    """A workflow over ``module`` alone, in ``folder`` (with a copy of the module)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(module, folder / module.name)
    workflow = folder / "wf.yaml"
    workflow.write_text(
        f"name: lone\nversion: '1'\ntools: [{module.stem}]\nsteps:\n  - id: a\n    tool: x.y\n"
    )
    return workflow


def _outcome(build: Callable[[], Registry]) -> Registry | InputError:
    try:
        return build()
    except InputError as exc:
        return exc


def assert_agree(workflow: Path, describe: Callable[[Any], Registry]) -> int:
    """The static view of ``workflow`` agrees with ``describe``'s; returns the tools compared.

    Same ids, SDK frameworks and names; for every tool the reading claims (``unread`` None)
    the same effect, declared effect, description, qualname and line, and the same schema
    hash unless it is an SDK's schema the reading leaves to the sandbox; the same input
    error when there is one.
    """
    loaded = load_workflow(workflow)
    static = _outcome(lambda: static_registry(loaded))
    described = _outcome(lambda: describe(loaded))
    if isinstance(static, InputError) or isinstance(described, InputError):
        assert isinstance(static, InputError) and isinstance(described, InputError), (
            static,
            described,
        )
        keys = ("file", "line", "field")
        assert [static.fields.get(k) for k in keys] == [described.fields.get(k) for k in keys]
        assert static.message.split(":")[0] == described.message.split(":")[0]
        return 0
    if locate_tools(loaded).mcp_servers:  # the reading lists no server: the sandbox alone does
        assert set(static.ids()) <= set(described.ids()), (static.ids(), described.ids())
    else:
        assert static.ids() == described.ids(), (static.ids(), described.ids())
    for tool in static:
        other = described.resolve(tool.id)
        assert (tool.module, tool.qualname, tool.line, tool.file) == (
            other.module,
            other.qualname,
            other.line,
            other.file,
        ), tool.id
        assert (tool.framework, tool.sdk_name) == (other.framework, other.sdk_name), tool.id
        if tool.unread is None:
            assert (tool.effect, tool.declared_effect) == (other.effect, other.declared_effect)
            assert tool.description == other.description, tool.id
            if tool.framework is None or tool.schema_hash:  # an SDK's schema: the SDK's alone
                assert tool.schema_hash == other.schema_hash, tool.id
                assert tool.schema == other.schema, tool.id
        else:
            assert tool.effect.value == "unsafe"  # it claims nothing else
    return len(static)
