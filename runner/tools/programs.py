"""Where a program step's module lives, found without importing it.

A program step (``program: module:function``) is the user's own agent code: it is imported
inside the sandbox only, never on the host (not even for ``check``). The host needs only the
folder to mount: the ``sys.path`` entry holding the module's top-level package, found by a
directory scan (`importlib.machinery.PathFinder.find_spec`: no module code, no ``.pth`` file
runs) over the workflow's folder and the current directory, then the installed packages.

Invariant: nothing here imports, executes or ``exec``s a file of the workflow's folder.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import InputError

if TYPE_CHECKING:
    from runner.domain.workflow import WorkflowFile

__all__ = ["module_root", "program_modules", "program_roots", "top_spec"]

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def top_spec(
    name: str, search: list[Path], installed: bool
) -> importlib.machinery.ModuleSpec | None:
    """The spec of ``name``'s top-level package, found by a directory scan (nothing imported).

    Args:
        name: a dotted module name (anything else: None).
        search: folders looked in first.
        installed: also look in the installed packages (the host's ``sys.path``).
    """
    if not _MODULE.match(name):
        return None
    top = name.split(".")[0]
    spec = importlib.machinery.PathFinder.find_spec(top, [str(p) for p in search])
    if spec is None and installed:
        spec = importlib.machinery.PathFinder.find_spec(top)  # the installed packages
    return spec


def module_root(name: str, search: list[Path], installed: bool) -> Path | None:
    """The ``sys.path`` folder holding ``name``'s top-level package, found by a directory scan.

    Args:
        name: a dotted module name.
        search: folders looked in first.
        installed: also look in the installed packages (the host's ``sys.path``).

    Returns:
        The folder, or None when the module is not found (or is built in or frozen).
    """
    spec = top_spec(name, search, installed)
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0]).resolve().parent
    if spec.origin is None or not os.path.isabs(spec.origin):
        return None  # built-in or frozen: nothing to mount
    return Path(spec.origin).resolve().parent


def program_modules(
    workflow: WorkflowFile, *, confined_to: Path | None = None
) -> list[tuple[int, str, Path]]:
    """Where every program step's module is: ``(step index, module name, host root folder)``.

    Args:
        workflow: the loaded workflow.
        confined_to: look only in this folder (a trace's or a packet's own: its code is all
            inside it; never the current directory or the installed packages).

    Returns:
        One entry per program step, in step order (empty without program steps).

    Raises:
        InputError: a program module that is not found (workflow file, line,
            ``steps[i].program``): invalid input, exit 2.
    """
    self_contained = confined_to is not None
    folders = [confined_to] if confined_to else [workflow.folder, Path.cwd().resolve()]
    search = list(dict.fromkeys(folders))
    found: list[tuple[int, str, Path]] = []
    for index, step in enumerate(workflow.spec.steps):
        if step.program is None:
            continue
        module = step.program.partition(":")[0]
        # the user's own code: in the workflow's folder (or the current one), never a module of
        # the standard library or the installed packages (``program: os:system`` is refused)
        root = module_root(module, search, installed=False)
        if root is None:
            looked = ", ".join(str(p) for p in search)
            raise InputError(
                f"program module {module!r} of step {step.id!r} is not found (looked in {looked}"
                + (
                    ""
                    if self_contained
                    else "; a program is your own code, never a module of the"
                    " standard library or the installed packages"
                )
                + ")",
                file=str(workflow.path),
                line=workflow.line_of(("steps", index, "program")),
                field=f"steps[{index}].program",
            )
        found.append((index, module, root))
    return found


def program_roots(workflow: WorkflowFile, *, confined_to: Path | None = None) -> list[Path]:
    """The distinct folders of `program_modules`, in step order (what a sandbox must mount).

    Raises:
        InputError: as `program_modules`.
    """
    return list(
        dict.fromkeys(root for _, _, root in program_modules(workflow, confined_to=confined_to))
    )
