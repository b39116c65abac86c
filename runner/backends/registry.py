"""The backends by name: the one place a concrete backend is named (name → lazy factory).

Whatever chooses or lists backends reads them here: ``--backend`` (its check and its help),
the setting ``SANDBOX_REPLAY_BACKEND``, ``doctor``, the plan and the report (``plan.backend``),
``record``'s local process, and the conformance suite (every sandboxing entry and each of its
variants, `runner.backends.conformance`). An entry names its code by ``module:attribute``
strings, imported when the backend is made: choosing one imports nothing of the others (the
docker SDK costs ~0.14 s to import, ray ~1 s), and this module imports nothing but the
standard library and the interface, so ``--help`` can list the names.

Adding a backend (docs/internals.md, "Adding a backend"): its package under
``runner/backends/`` (a `Backend` subclass with a ``from_settings(settings, options)`` factory
and a ``diagnose`` function for ``doctor``), then one `BackendEntry` line in `BACKENDS` below,
one line in the ``concrete-backends`` contract of pyproject.toml (no package below the CLI
imports it), and its extra in pyproject.toml when it needs a package of its own. Nothing else
names it: the CLI, the settings, ``doctor``, ``submit`` and the conformance suite read it here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from runner.errors import InputError

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.settings import Settings

__all__ = [
    "BACKENDS",
    "DEFAULT",
    "RECORD",
    "BackendEntry",
    "BackendOptions",
    "entry",
    "here",
    "load",
    "names",
]


@dataclass(frozen=True)
class BackendOptions:
    """What a command says about its backend beyond the settings.

    Attributes:
        flags: the backend-specific flags given, by name (``{"--ray-address": "head:6379"}``);
            each entry says which it takes (`BackendEntry.flags`), the CLI refuses the others.
        session_id: the id its sandboxes are labelled with (None: a fresh one); the
            conformance checks' reaper test connects a second backend of a dead session.
        env: extra environment variables for the runtime (the unsandboxed process backend of
            ``record`` only: a sandbox's environment is its spec's, never the host's).
    """

    flags: Mapping[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BackendEntry:
    """One backend: its name, what it is, and where its code is (imported on use).

    Attributes:
        name: the name (``--backend NAME``, ``SANDBOX_REPLAY_BACKEND``, a trace's ``backend``).
        summary: what it is, a few words for ``--help`` (``this machine's engine``).
        factory: ``module:Class.method`` (or ``module:function``) called as
            ``factory(settings, options)``: makes the backend, connected.
        doctor: ``module:function`` called as ``diagnose(settings, options, runner_mounts)``
            (`runner.backends.doctor.Diagnosis`); "" when ``doctor`` has nothing to check.
        runs_here: its sandboxes run on this machine: ``run``, ``reproduce`` and ``packet``
            may use it, and ``submit`` asks its engine before the plan is printed (a cluster's
            nodes are weighed when the job runs).
        selectable: a ``--backend`` choice (False: ``record``'s unsandboxed process).
        flags: the backend-specific flags it takes (``--runtime``, ``--ray-address``, ...).
        extra: the pip extra it needs (``pip install 'sandbox-replay[EXTRA]'``), or "".
        conformance: the variants the conformance suite runs, by test name, each with the
            settings it changes (``{"docker-copy": {"host_files": "copy"}}``); empty: the
            suite does not run it and ``exempt`` says why.
        exempt: why the conformance suite does not run it ("" when it does).
    """

    name: str
    summary: str
    factory: str
    doctor: str = ""
    runs_here: bool = True
    selectable: bool = True
    flags: frozenset[str] = frozenset()
    extra: str = ""
    conformance: Mapping[str, Mapping[str, Any]] | None = None
    exempt: str = ""

    def __post_init__(self) -> None:
        if self.conformance is None:  # default: the suite runs it once, as the settings say
            variants: Mapping[str, Mapping[str, Any]] = {} if self.exempt else {self.name: {}}
            object.__setattr__(self, "conformance", MappingProxyType(dict(variants)))

    def make(self, settings: Settings, options: BackendOptions | None = None) -> Backend:
        """Make the backend (import its package, connect it).

        Raises:
            InputError: its extra is not installed (exit 2, the message names the fix).
            InfrastructureError: its engine is unusable (exit 6), as its factory says.
        """
        made: Backend = load(self.factory, extra=self.extra, backend=self.name)(
            settings, options or BackendOptions()
        )
        return made


def load(target: str, *, extra: str = "", backend: str = "") -> Callable[..., Any]:
    """The attribute ``target`` (``module:attr.attr``) names, its module imported now.

    Raises:
        InputError: the module needs a package that is not installed (``extra`` names the
            pip extra that brings it).
    """
    module_name, _, attribute = target.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        if not extra:
            raise
        raise InputError(
            f"--backend {backend} needs the {extra} extra: pip install 'sandbox-replay[{extra}]'"
            f" ({exc})"
        ) from exc
    for part in attribute.split("."):
        found = getattr(found, part)
    loaded: Callable[..., Any] = found
    return loaded


_ENTRIES = (
    BackendEntry(
        "docker",
        "this machine's engine",
        "runner.backends.docker.backend:DockerBackend.from_settings",
        doctor="runner.backends.docker.doctor:diagnose",
        flags=frozenset({"--runtime"}),
        conformance={"docker": {}, "docker-copy": {"host_files": "copy"}},
    ),
    BackendEntry(
        "namespace",
        "bubblewrap on this Linux host",
        "runner.backends.namespace.backend:NamespaceBackend.from_settings",
        doctor="runner.backends.namespace.checks:diagnose",
        # its default start (each sandbox forked from a zygote) and one bwrap per sandbox
        conformance={"namespace": {}, "namespace-bwrap": {"namespace_start": "bwrap"}},
    ),
    BackendEntry(
        "ray",
        "a Ray cluster's nodes",
        "runner.backends.ray.backend:RayBackend.from_settings",
        doctor="runner.backends.ray.doctor:diagnose",
        runs_here=False,
        flags=frozenset({"--ray-address", "--unsafe-open-cluster"}),
        extra="ray",
        exempt="needs a cluster: tests/integration/test_ray_backend.py runs the sandbox checks"
        " (SANDBOX_CHECKS) through the driver and a node; the leftovers are the node's Docker"
        " backend's (the docker entry)",
    ),
    BackendEntry(
        "process",
        "record's local process, no isolation",
        "runner.backends.unsandboxed:UnsandboxedProcessBackend.from_settings",
        selectable=False,
        exempt="record's local process backend: runs the user's own tools unsandboxed, by design",
    ),
)

BACKENDS: dict[str, BackendEntry] = {e.name: e for e in _ENTRIES}
"""Every backend by name. A test registers one more with one line:
``monkeypatch.setitem(BACKENDS, "tiny", BackendEntry("tiny", "a test", "tests...:make"))``."""

DEFAULT = "docker"
"""The backend when neither ``--backend`` nor ``SANDBOX_REPLAY_BACKEND`` says."""

RECORD = "process"
"""``record``'s backend: the runtime as a local process, by design without a sandbox."""


def names(*, selectable: bool = True) -> list[str]:
    """The backends' names in registry order (``selectable``: only ``--backend`` choices)."""
    return [e.name for e in BACKENDS.values() if e.selectable or not selectable]


def entry(name: str, *, source: str = "--backend", selectable: bool = True) -> BackendEntry:
    """The entry of ``name``.

    Args:
        name: a backend's name.
        source: where the name came from, for the error (``--backend``,
            ``SANDBOX_REPLAY_BACKEND``).
        selectable: refuse a backend that is no ``--backend`` choice.

    Raises:
        InputError: no such backend (exit 2, the choices named).
    """
    found = BACKENDS.get(name)
    if found is None or (selectable and not found.selectable):
        choices = ", ".join(names(selectable=selectable))
        raise InputError(f"no backend {name[:40]!r}: choose {choices}", field=source)
    return found


def here(settings: Settings) -> BackendEntry:
    """The settings' backend when it runs on this machine, else the default (`DEFAULT`).

    For the short sandboxes a caller starts without a ``--backend`` of its own (a tool
    description for ``check`` or ``packet``, a library's reproduce): ``SANDBOX_REPLAY_BACKEND``
    is honoured when it can run them here; a cluster's setting is not a reason to send them
    off this machine.

    Raises:
        InputError: the setting names no backend (exit 2).
    """
    chosen = entry(settings.backend, source="SANDBOX_REPLAY_BACKEND")
    return chosen if chosen.runs_here else entry(DEFAULT)
