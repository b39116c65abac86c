"""The in-sandbox part imports only the standard library (and itself), and imports on Python 3.9.

The in-sandbox part is a list of packages, `runner.wire.protocol.SANDBOX_PACKAGES` (the
packages mounted into sandboxes, beside ``runner/__init__.py``), never a list of files: a module
added to one of them is checked without anyone remembering to list it. Walks, with the AST (so
imports inside functions and ``try`` blocks count too), the imports of every module of those
packages, following imports of other ``runner`` modules transitively. Anything outside the
standard library, or a ``runner`` module outside those packages, fails the test with the
importing file and line. import-linter's ``sandbox-side`` contract (pyproject.toml) names the
same packages.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from runner.wire.protocol import SANDBOX_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "runner"
PY39 = "/root/.pyenv/versions/3.9.18/bin/python"

ALLOWED_FILES = {
    PACKAGE / "__init__.py",
    *(path for name in SANDBOX_PACKAGES for path in (PACKAGE / name).rglob("*.py")),
}
STARTS = sorted(ALLOWED_FILES - {PACKAGE / "__init__.py"})
# Importing these runs something (the runtime's entry point, the audit hook of children).
NOT_IMPORTED = {
    "runner.runtime.__main__",
    "runner.runtime.worker.__main__",
    "runner.runtime.egress.site.sitecustomize",
}


def _module_file(name: str) -> Path | None:
    """The file of module ``runner...`` inside this checkout, or None if there is none."""
    parts = name.split(".")[1:]
    base = PACKAGE.joinpath(*parts) if parts else PACKAGE
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_of(path: Path) -> list[str]:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    return parts[:-1]


def _imports(path: Path) -> list[tuple[str, int]]:
    """``(absolute module name, line)`` of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = _package_of(path)
                if path.name == "__init__.py":
                    package = list(path.relative_to(ROOT).parent.parts)
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            # ``from runner import sdk`` imports the submodule runner.sdk
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                if candidate.startswith("runner.") and _module_file(candidate):
                    found.append((candidate, node.lineno))
    return found


def _violations() -> list[str]:
    stdlib = set(sys.stdlib_module_names)
    problems: list[str] = []
    seen: set[Path] = set()
    todo = list(STARTS)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module, line in _imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            top = module.split(".")[0]
            if top == "runner":
                target = _module_file(module)
                if target is None:
                    problems.append(f"{where}: {module} is not a module of this checkout")
                elif target not in ALLOWED_FILES:
                    problems.append(f"{where}: imports {module}, which is host-side code")
                else:
                    todo.append(target)
            elif top == "__future__" or top in stdlib:
                continue
            else:
                problems.append(f"{where}: imports {module}, which is not standard library")
    return problems


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_walker_sees_every_start_file() -> None:
    assert PACKAGE / "sdk" / "__init__.py" in STARTS
    assert PACKAGE / "wire" / "protocol.py" in STARTS
    assert PACKAGE / "trace" / "writer.py" in STARTS
    assert len(STARTS) >= 5


def test_the_sandbox_side_is_the_same_packages_for_import_linter() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}
    sources = contracts["sandbox-side"]["source_modules"]
    assert sorted(sources) == sorted(f"runner.{name}" for name in SANDBOX_PACKAGES)
    assert all((PACKAGE / name / "__init__.py").is_file() for name in SANDBOX_PACKAGES)


def test_walker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import yaml\n    from runner.domain import workflow\n")
    assert _imports(bad) == [("yaml", 2), ("runner.domain", 3), ("runner.domain.workflow", 3)]
    assert "yaml" not in sys.stdlib_module_names


def test_in_sandbox_code_imports_only_the_standard_library() -> None:
    problems = _violations()
    assert problems == [], "\n".join(problems)


@pytest.mark.skipif(not Path(PY39).exists(), reason="python3.9 not installed here")
def test_imports_on_python_39() -> None:
    done = subprocess.run(
        [
            PY39,
            "-c",
            "import " + ", ".join(sorted({_dotted(p) for p in STARTS} - NOT_IMPORTED)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
