"""Import rules that import-linter's contracts (pyproject.toml) cannot state alone, with grimp.

- No cycle between a package and a module under it: import-linter's ``acyclic_siblings``
  compares siblings only, so ``runner.sdk`` importing ``runner.sdk.recorder`` (lazily) while the
  recorder imported ``runner.sdk`` went unseen. Imports inside functions and under
  ``TYPE_CHECKING`` count, as in the sibling contract.
- The ``concrete-backends`` and ``runtime-leaf`` contracts list their source modules by name:
  every module of runner they must hold is listed, so a new module cannot slip past them.
"""

from __future__ import annotations

import tomllib
from functools import cache
from typing import Any

import grimp

from runner.backends.registry import BACKENDS
from tests.support.paths import REPO

CONCRETE = [
    f"runner.backends.{target.partition(':')[0].split('.')[2]}"
    for target in (e.factory for e in BACKENDS.values())
]


@cache
def _graph() -> Any:
    return grimp.build_graph("runner", cache_dir=None)


def _contract(contract_id: str) -> dict[str, Any]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (found,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == contract_id]
    return dict(found)


def _covered(module: str, sources: list[str]) -> bool:
    return any(module == s or module.startswith(s + ".") for s in sources)


def test_no_module_and_package_above_it_import_each_other() -> None:
    graph = _graph()
    cycles = []
    for module in sorted(graph.modules):
        parts = module.split(".")
        for depth in range(1, len(parts)):
            package = ".".join(parts[:depth])
            if graph.chain_exists(importer=module, imported=package) and graph.chain_exists(
                importer=package, imported=module
            ):
                chain = graph.find_shortest_chain(importer=module, imported=package)
                cycles.append(f"{package} <-> {module}: {' -> '.join(chain)}")
    assert cycles == []


def test_every_module_below_the_cli_is_held_to_the_concrete_backends_contract() -> None:
    contract = _contract("concrete-backends")
    assert sorted(contract["forbidden_modules"]) == sorted(CONCRETE)  # the registry's backends
    # the CLI and the backends' own packages may name them; the package roots import nothing
    allowed = ["runner.cli", *CONCRETE]
    loose = [
        m
        for m in sorted(_graph().modules)
        if not _covered(m, [*contract["source_modules"], *allowed])
        and m not in ("runner", "runner.__main__", "runner.backends")
    ]
    assert loose == [], f"add these to the concrete-backends contract's source_modules: {loose}"


def test_every_host_package_is_held_to_the_runtime_leaf_contract() -> None:
    contract = _contract("runtime-leaf")
    assert contract["forbidden_modules"] == ["runner.runtime"]
    loose = [
        m
        for m in sorted(_graph().modules)
        if not _covered(m, ["runner.runtime", *contract["source_modules"]])
        and m not in ("runner", "runner.__main__")
    ]
    assert loose == [], f"add these to the runtime-leaf contract's source_modules: {loose}"
