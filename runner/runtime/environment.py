"""The sandbox's interpreter: what ``hello`` says of it (platform, packages), its import path.

Standard library only, Python 3.9+, and cheap: it runs at the start of every sandboxed run, so it
imports nothing beyond ``os`` and ``sys`` on the usual path (no ``importlib.metadata``, which
pulls in ``email``, ``zipfile``, ``pathlib`` and more: ~30 ms of CPU per run; no
``platform.libc_ver()``, which reads the whole interpreter binary).

Invariants:
    `installed_packages` gives what ``importlib.metadata.distributions()`` gives for the
    distributions installed as folders or files on ``sys.path`` (``*.dist-info``,
    ``*.egg-info``): the ``Name`` and ``Version`` headers of their ``METADATA``/``PKG-INFO``,
    first occurrence along ``sys.path`` wins. Distributions inside zip files or ``.egg``
    folders are not listed. A broken entry is skipped, never an error.
"""

import os
import sys
from typing import Dict, Iterable, Optional, Tuple

_SUFFIXES = (".dist-info", ".egg-info")
_HEADER_LINES = 40  # Name and Version come first in core metadata; stop well before the body


def drop_start_folder() -> Optional[str]:
    """Take the start folder out of ``sys.path``: tool code can write there (``/tmp``).

    ``python3 -m`` puts the working directory first on ``sys.path`` (Python docs, "sys.path":
    "python -m module command line: prepend the current working directory"). The runtime and
    the worker start with the sandbox's working directory, ``/tmp`` (writable: tool code may
    write it), so a module a tool leaves there, ``/tmp/traceback.py`` say, would shadow the
    standard library for every later import of the runtime (PID 1) or of the worker: tool code
    run outside the worker. Called first thing by both entry points, while the folder is still
    the sandbox's fresh one (no tool has run yet). Nothing is taken out when the interpreter
    added nothing (``-I``, ``-P``/``PYTHONSAFEPATH``); later entries equal to the folder
    (``PYTHONPATH``) stay.

    Returns:
        The entry taken out, or None.
    """
    if getattr(sys.flags, "safe_path", False) or sys.flags.isolated or not sys.path:
        return None
    first = sys.path[0]
    try:
        here = os.getcwd()
    except OSError:  # the working directory is gone: "" still means it
        here = None
    if first == "" or (here is not None and os.path.abspath(first) == here):
        del sys.path[0]
        return first
    return None


def environment_platform() -> str:
    """``os-machine-libcVERSION``, e.g. ``linux-x86_64-glibc2.36`` (the trace's environment)."""
    machine = ""
    uname = getattr(os, "uname", None)
    if uname is not None:
        machine = uname().machine
    libc = _libc()
    parts = [sys.platform, machine or "unknown"]
    if libc:
        parts.append(libc)
    return "-".join(parts)


def _libc() -> str:
    """``glibc2.36`` from ``confstr`` (no file read); else what ``platform.libc_ver`` says."""
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        value = None
    if value:
        return value.replace(" ", "")
    import platform  # musl, macOS, Windows: rare in sandboxes; the slow, general answer

    name, version = platform.libc_ver()
    return name + version if name else ""


def installed_packages(path: Optional[Iterable[str]] = None) -> Dict[str, str]:
    """``{distribution name: version}`` of the packages installed on ``path``, sorted by name.

    Args:
        path: folders to scan, in order; None means ``sys.path`` (``""`` is the current folder).
    """
    found: Dict[str, str] = {}
    for entry in sys.path if path is None else path:
        for meta_path, folder_name in _metadata_files(entry or "."):
            name, version = _name_version(meta_path, folder_name)
            if name and name not in found:
                found[name] = version
    return dict(sorted(found.items()))


def _metadata_files(folder: str) -> Iterable[Tuple[str, str]]:
    """``(metadata file, dist folder name)`` for each distribution in ``folder``, sorted."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:  # missing, a zip file, unreadable: nothing installed there for us
        return []
    out = []
    for name in names:
        lower = name.lower()
        if lower.endswith(".dist-info"):
            out.append((os.path.join(folder, name, "METADATA"), name))
        elif lower.endswith(".egg-info"):
            full = os.path.join(folder, name)
            # An egg-info is a folder holding PKG-INFO, or (old distutils) the file itself.
            meta = os.path.join(full, "PKG-INFO") if os.path.isdir(full) else full
            out.append((meta, name))
    return out


def _name_version(meta_path: str, folder_name: str) -> Tuple[str, str]:
    """``(Name, Version)`` from the metadata headers, else from the folder name."""
    name = version = ""
    try:
        with open(meta_path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle):
                if number >= _HEADER_LINES or not line.strip():
                    break  # end of the headers (or far enough)
                key, sep, value = line.partition(":")
                if not sep:
                    continue
                key = key.strip().lower()
                if key == "name" and not name:
                    name = value.strip()
                elif key == "version" and not version:
                    version = value.strip()
                if name and version:
                    break
    except OSError:
        pass
    if not name:
        # ``name-version.dist-info`` / ``name-version[-pyX.Y].egg-info``
        stem = folder_name
        for suffix in _SUFFIXES:
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
        parts = stem.split("-")
        if len(parts) >= 2:
            name, version = parts[0], version or parts[1]
    return name, version
