"""Where the packaged data lives: the default policies and the sandbox image's build context.

The one canonical copy is the repository's top-level ``policies/`` and ``images/``. A wheel
carries them as ``runner/_data/policies`` and ``runner/_data/images`` (pyproject.toml,
force-include); an editable install or a source checkout reads the top-level folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    packaged = _PACKAGE_DIR / "_data" / name
    if packaged.is_dir():
        return packaged
    source = _PACKAGE_DIR.parent / name
    if source.is_dir():
        return source
    raise FileNotFoundError(f"packaged data folder {name!r} not found next to {_PACKAGE_DIR}")


def policies_dir() -> Path:
    """Folder of the default policy files (``shadow.yaml``, ``reproduce.yaml``).

    Raises:
        FileNotFoundError: the installation is incomplete.
    """
    return _data_dir("policies")


def images_dir() -> Path:
    """Docker build context of the sandbox image (``Dockerfile``, offline base-image script).

    Raises:
        FileNotFoundError: the installation is incomplete.
    """
    return _data_dir("images")


def package_dir() -> Path:
    """The installed ``runner`` package folder, mounted read-only into sandboxes."""
    return _PACKAGE_DIR
