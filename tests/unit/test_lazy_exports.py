"""Packages whose surface loads on first use (`runner.lazyexports`) declare it once, coherently.

Such a package names each export three times: under ``TYPE_CHECKING`` (for mypy and
import-linter), in ``__all__`` and in the `lazy_exports` table. They must agree, and each entry
must point at the module that defines the name, or a rename would break only at run time.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

from tests.support.paths import REPO

LAZY = [
    "runner.backends",
    "runner.episode",
    "runner.admission",
    "runner.policy",
    "runner.providers",
    "runner.runs",
    "runner.tools",
]


def _type_checking_names(package: str) -> dict[str, str]:
    path = REPO / (package.replace(".", "/") + "/__init__.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                names.update({alias.name: stmt.module for alias in stmt.names})
    return names


@pytest.mark.parametrize("package", LAZY)
def test_the_three_lists_agree_and_resolve(package: str) -> None:
    module = importlib.import_module(package)
    declared = _type_checking_names(package)
    assert sorted(declared) == sorted(module.__all__)
    for name, source in declared.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name)
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_importing_one_module_loads_not_the_whole_package() -> None:
    code = (
        "import sys; import runner.episode.request; "
        "print('runner.episode.driver' in sys.modules, 'runner.providers.factory' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.split() == ["False", "False"]
