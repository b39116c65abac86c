"""A program step's agent code: its module, the modules of its folder it imports, their hashes.

Standard library only, Python 3.9+: `runner.sdk.record` (in the user's process) and the host
(the tool snapshot, `runner.tools.snapshot.sources`; the run line of a sandbox run,
`runner.episode.tracelines`) find the same files with the same rule, read with `ast` (nothing
is imported or run), so that ``reproduce``'s environment diff can name the agent file that
changed between a recording and its replay (``environment.agent_code``, issue 27).
"""

import ast
import hashlib
import re
from pathlib import Path
from typing import Dict, Iterable, List

from runner.sdk import pyparse

__all__ = [
    "MAX_LOCAL_IMPORTS",
    "SDK_DISTRIBUTIONS",
    "agent_code",
    "loaded_agent_code",
    "local_imports",
    "program_modules_of",
    "sdk_versions",
]

MAX_AGENT_FILE_BYTES = 8 * 1024 * 1024
"""Bytes of one file read to parse or hash it (a bound on what a folder may hold)."""

MAX_LOCAL_IMPORTS = 200
"""The most modules `local_imports` follows from one program (a bound on hostile code)."""


def local_imports(root: Path, entry: str) -> List[str]:
    """The top-level modules of ``root`` that ``entry`` imports, transitively, read with `ast`.

    A program step's module is the user's agent code; SPEC.md puts "the packages it imports from
    the workflow's folder" into the tool snapshot. Only ``import X`` / ``from X import ...``
    whose ``X`` is a module file (``X.py``) or package (``X/__init__.py``) directly in ``root``
    counts; nothing is imported or run. Unreadable or unparsable files are skipped (the sandbox
    reports the import error).

    Args:
        root: the folder holding the program module.
        entry: the module file or package folder name below ``root`` (`_module_entry`).

    Returns:
        Entry names (``X.py`` or ``X``), sorted, without ``entry`` itself; at most
        `MAX_LOCAL_IMPORTS`.
    """
    seen = {entry}
    queue = [entry]
    while queue and len(seen) <= MAX_LOCAL_IMPORTS:
        current = root / queue.pop()
        files = sorted(current.rglob("*.py")) if current.is_dir() else [current]
        for file in files:
            try:
                tree = pyparse.parse(file.read_bytes()[:MAX_AGENT_FILE_BYTES], filename=str(file))
            except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for node in ast.walk(tree):
                names: List[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    for candidate in (f"{top}.py", top):
                        path = root / candidate
                        local = (
                            path.is_file()
                            if candidate.endswith(".py")
                            else (path / "__init__.py").is_file()
                        )
                        if local and candidate not in seen and not path.is_symlink():
                            seen.add(candidate)
                            queue.append(candidate)
    return sorted(seen - {entry})


def _files_of(root: Path, entry: str) -> List[Path]:
    path = root / entry
    if path.is_dir():
        return sorted(p for p in path.rglob("*.py") if p.is_file() and not p.is_symlink())
    return [path] if path.is_file() and not path.is_symlink() else []


def agent_code(root: Path, entries: Iterable[str]) -> Dict[str, str]:
    """sha256 hex of every file of the program modules ``entries`` and their local imports.

    Args:
        root: the folder holding the program modules (a ``sys.path`` folder).
        entries: module files (``agent.py``) or package folders (``agent``) directly in it.

    Returns:
        ``{path relative to root, "/"-separated: sha256 hex}``, sorted by path; a file that
        cannot be read is left out.
    """
    chosen: List[str] = []
    for entry in entries:
        chosen.extend([entry, *local_imports(root, entry)])
    hashes: Dict[str, str] = {}
    for entry in dict.fromkeys(chosen):
        for file in _files_of(root, entry):
            try:
                data = file.read_bytes()[:MAX_AGENT_FILE_BYTES]
            except OSError:
                continue
            hashes[file.relative_to(root).as_posix()] = hashlib.sha256(data).hexdigest()
    return dict(sorted(hashes.items()))


_PROGRAM = re.compile(
    r"""\bprogram:\s*["']?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):"""
)


def program_modules_of(workflow_text: str) -> List[str]:
    """The modules named by ``program: module:function`` in a workflow file's text.

    Read with a pattern, not a YAML parser (the SDK has only the standard library): block and
    flow style both write ``program: module:function``.
    """
    return list(dict.fromkeys(_PROGRAM.findall(workflow_text)))


def loaded_agent_code(workflow_text: str) -> Dict[str, str]:
    """`agent_code` of the program modules a workflow names, as this process loaded them.

    For `runner.sdk.record`: the modules are found in ``sys.modules`` (the agent is running
    in this process, so they are imported already); nothing is imported here. A module not
    loaded, or not a file, is left out.
    """
    import sys

    hashes: Dict[str, str] = {}
    for name in program_modules_of(workflow_text):
        top = sys.modules.get(name.split(".")[0])
        where = getattr(top, "__file__", None)
        if not isinstance(where, str):
            continue
        path = Path(where).resolve()
        if path.name == "__init__.py":
            root, entry = path.parent.parent, path.parent.name
        else:
            root, entry = path.parent, path.name
        hashes.update(agent_code(root, [entry]))
    return dict(sorted(hashes.items()))


SDK_DISTRIBUTIONS = (
    "anthropic",
    "httpx",
    "langchain-core",
    "langgraph",
    "litellm",
    "mcp",
    "openai",
    "openai-agents",
    "pydantic",
)
"""The agent SDKs whose versions `runner.sdk.record` writes into ``environment.packages``
(the SDKs issue 27 tried agents on, and the HTTP and model libraries under them)."""


def sdk_versions() -> Dict[str, str]:
    """``{distribution: version}`` of the `SDK_DISTRIBUTIONS` installed in this process."""
    import contextlib
    import importlib.metadata

    found: Dict[str, str] = {}
    for name in SDK_DISTRIBUTIONS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):  # not installed
            found[name] = importlib.metadata.version(name)
    return found
