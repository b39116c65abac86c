"""The conformance checks every sandboxing backend passes (the Inspect pattern), shipped here.

One list, `CHECKS`, of functions ``check(subject)`` that raise `ConformanceError` (an
`AssertionError`) on a violation and `NotApplicable` where the backend's `Capabilities` say it
legitimately differs; each runs real sandboxes of the real image through `Subject.backend`:
a sandbox (exit code, stdout and stderr apart), the stdio channel both ways, no network (a
connect fails; a loopback listener inside the same sandbox is the positive control; DNS fails
fast), a read-only root with a writable ``/tmp``, a non-root user without capabilities, only
the spec's environment, read-only mounts, of ``runner`` only the sandbox-side packages (seen from
inside, and in the engine's mount list when it reports one, `Backend.engine_mounts`) with
their bytecode, the memory, pids and CPU limits, the host's kill, the timeout and the lifetime
cap in the `ExitState`, owner labels the reaper reads (a SIGKILLed owner's sandbox is reaped, a
live one's is not), and no sandbox left behind (`Backend.session_sandboxes`), also when the
body raises. Every network attempt happens inside the sandbox (TEST-NET-1 address 192.0.2.1).

Every registry entry with conformance variants runs them (tests/integration/conformance/, one
test per check and variant); a backend joins by its registry line alone. Nothing here imports
pytest or a concrete backend: a subject is made from a registry entry (`Subject.of`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner import resources
from runner.backends.base import (
    STDOUT,
    Backend,
    ExitState,
    LifetimeCap,
    Mount,
    ResourceLimits,
    SandboxSpec,
)
from runner.backends.conformance_programs import (
    ALLOWED_ENV,
    CPU_QUOTA,
    CRASHING_OWNER,
    ECHO,
    LOOK,
    PROBE,
    RUNTIME_IMPORTS,
    THREADS,
)
from runner.backends.registry import BackendEntry, BackendOptions
from runner.wire.protocol import RUNTIME_ROOT, SANDBOX_PACKAGES

if TYPE_CHECKING:
    from runner.settings import Settings

__all__ = [
    "CHECKS",
    "LIFECYCLE_CHECKS",
    "SANDBOX_CHECKS",
    "ConformanceError",
    "NotApplicable",
    "Subject",
]


class ConformanceError(AssertionError):
    """A backend broke an invariant of `runner.backends.base` (the message says which)."""


class NotApplicable(Exception):
    """The check does not apply: the backend's `Capabilities` declare the weaker property."""


def _expect(condition: object, message: object) -> None:
    if not condition:
        raise ConformanceError(str(message))


@dataclass
class Subject:
    """A backend under test and what the checks need beside it.

    Attributes:
        name: the variant's name (``docker-copy``): the test id.
        backend: the connected backend (the caller closes it).
        image: the sandbox image (the real one: python3, no compilers).
        connect: ``session id -> Backend``: another backend of the same kind and settings.
        child_code: Python source that binds ``backend`` for the session id ``sys.argv[1]`` in a
            fresh process (the reaper check SIGKILLs that process).
        runner_mounts: the runtime's mounts (`runner.episode.prepare.runner_mounts`).
        scratch: a folder the checks may write (the read-only mount's source).
    """

    name: str
    backend: Backend
    image: str
    connect: Callable[[str], Backend]
    child_code: str
    runner_mounts: Sequence[Mount]
    scratch: Path
    _probe: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def of(
        cls,
        entry: BackendEntry,
        variant: str,
        settings: Settings,
        *,
        image: str,
        runner_mounts: Sequence[Mount],
        scratch: Path,
        session_id: str,
    ) -> Subject:
        """The subject of one conformance variant of a registry entry, connected.

        Args:
            entry: the registry entry.
            variant: one of ``entry.conformance`` (its settings changes apply).
            settings: the settings the variant's changes apply to (the child process builds
                the same from their non-secret fields).
            image: the sandbox image.
            runner_mounts: the runtime's mounts.
            scratch: a writable folder.
            session_id: the session id of the backend under test.

        Raises:
            InfrastructureError, InputError: the backend could not be made.
        """
        changes = dict((entry.conformance or {})[variant])
        settings = settings.model_copy(update=changes)

        def connect(session: str) -> Backend:
            return entry.make(settings, BackendOptions(session_id=session))

        fields = {
            k: str(v)
            for k, v in settings.model_dump(exclude_none=True).items()
            if k in ("state_dir", "docker_host", "host_files", "namespace_rootfs", "image")
        }
        spec = json.dumps({"entry": [entry.name, entry.summary, entry.factory], "fields": fields})
        child_code = (
            "import json, sys\n"
            "from runner.backends.registry import BackendEntry, BackendOptions\n"
            "from runner.settings import Settings\n"
            f"_spec = json.loads({spec!r})\n"
            "backend = BackendEntry(*_spec['entry']).make(\n"
            "    Settings(**_spec['fields']), BackendOptions(session_id=sys.argv[1]))\n"
        )
        return cls(
            variant,
            connect(session_id),
            image,
            connect,
            child_code,
            tuple(runner_mounts),
            scratch,
        )

    def probe(self) -> dict[str, Any]:
        """`PROBE`'s findings in one hardened sandbox (run once, shared by the checks)."""
        if self._probe is None:
            folder = self.scratch / "dir with spaces, ü, 日本 and a:colon"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "data.txt").write_text("grüße from the host\n", encoding="utf-8")
            folder.chmod(0o755)
            (folder / "data.txt").chmod(0o644)  # readable by any sandbox user
            spec = SandboxSpec(
                run_id=_run_id("hardening"),
                image=self.image,
                command=("python3", "-I", "-c", PROBE),
                mounts=(Mount(folder, "/sandbox/ro"),),
                env={"TZ": "UTC"},
                limits=ResourceLimits(memory_mb=128, pids_limit=32, cpus=0.5, tmpfs_mb=8),
            )
            state, out, err = run(self.backend, spec)
            _expect(state.exit_code == 0, (state, out, err))
            _expect(b"probe done" in err, "stderr did not arrive apart from stdout")
            self._probe = {**_json_line(out), "mount_dir": str(folder)}
        return self._probe

    def leftovers(self, backend: Backend | None = None) -> list[str]:
        """The session's sandboxes still there (`Backend.session_sandboxes`, never None)."""
        found = (backend or self.backend).session_sandboxes()
        _expect(found is not None, f"{self.name} cannot list its sandboxes (session_sandboxes)")
        assert found is not None
        return found


def _run_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


def run(
    backend: Backend, spec: SandboxSpec, timeout_s: float = 30.0
) -> tuple[ExitState, bytes, bytes]:
    """Run ``spec`` to its end: ``(exit state, stdout, stderr)``.

    Raises:
        ConformanceError: ``frames`` did not end within ``timeout_s`` (+ 5 s).
    """
    out, err = bytearray(), bytearray()
    with backend.sandbox(spec) as box:
        deadline = time.monotonic() + timeout_s
        for frame in box.frames(0.2):
            if frame is not None:
                (out if frame[0] == STDOUT else err).extend(frame[1])
            _expect(time.monotonic() < deadline + 5, "frames() did not end")
        state = box.wait(max(0.1, deadline - time.monotonic()))
    return state, bytes(out), bytes(err)


def _json_line(out: bytes) -> dict[str, Any]:
    lines = out.decode("utf-8", "replace").strip().splitlines()
    _expect(lines, f"no output: {out[-500:]!r}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- a sandbox from the real image, and its channel --------------------------------------------


def stdout_stderr_and_exit_code_apart(subject: Subject) -> None:
    """A sandbox of the real image keeps stdout, stderr and the exit code apart."""
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    spec = SandboxSpec(_run_id("image"), subject.image, ("python3", "-c", code))
    state, out, err = run(subject.backend, spec)
    _expect((state.exit_code, state.killed_by_host, state.oom_killed) == (3, False, False), state)
    _expect(out == b"out\n" and err == b"err\n", (out, err))


def channel_carries_bytes_both_ways(subject: Subject) -> None:
    """Every byte value written to stdin comes back on stdout (the channel is binary-clean)."""
    payload = bytes(range(256)) * 64 + b"\n\x00end"
    spec = SandboxSpec(
        _run_id("channel"), subject.image, ("python3", "-c", ECHO, str(len(payload)))
    )
    out = bytearray()
    with subject.backend.sandbox(spec) as box:
        box.write(payload, timeout_s=10)
        for frame in box.frames(0.2):
            if frame is not None and frame[0] == STDOUT:
                out.extend(frame[1])
        state = box.wait(30)
    _expect(state.exit_code == 0, state)
    _expect(bytes(out) == payload[::-1], "the bytes came back changed")


# --- hardening: one probe sandbox ---------------------------------------------------------------


def no_route_out_but_loopback(subject: Subject) -> None:
    """A TCP connect to an address off the sandbox is unreachable; loopback works inside."""
    probe = subject.probe()
    _expect(probe["connect"] == "ENETUNREACH", probe["connect"])
    _expect(probe["loopback"] == "ping", probe["loopback"])  # positive control


def dns_fails_fast(subject: Subject) -> None:
    """A name lookup fails within two seconds; ``localhost`` is loopback (the hosts file)."""
    probe = subject.probe()
    _expect(probe["dns"] == "gaierror" and probe["dns_s"] < 2.0, (probe["dns"], probe["dns_s"]))
    _expect(probe["localhost"] == ["127.0.0.1", "::1"], probe["localhost"])


def read_only_root_and_writable_tmp(subject: Subject) -> None:
    """The root filesystem is read-only, ``/tmp`` is writable and is HOME and TMPDIR."""
    probe = subject.probe()
    _expect(probe["root_write"] == "EROFS" and probe["tmp_write"] == "ok", probe)
    inside = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not a host path
    _expect(probe["home"] == inside and probe["tmpdir"] == inside, probe)


def non_root_without_capabilities(subject: Subject) -> None:
    """The sandbox runs as a non-root user, no capabilities, ``no_new_privs`` set."""
    probe = subject.probe()
    _expect(probe["uid"] != 0 and int(probe["cap_eff"], 16) == 0, probe)
    _expect(probe["no_new_privs"] == "1", probe)


def no_compilers_or_network_tools(subject: Subject) -> None:
    """The image has no compilers and no network tools."""
    _expect(subject.probe()["tools"] == [], subject.probe()["tools"])


def only_the_specs_environment(subject: Subject) -> None:
    """The environment is the image's and the spec's, nothing of the host's."""
    keys = set(subject.probe()["env_keys"])
    _expect(keys <= ALLOWED_ENV, keys - ALLOWED_ENV)


def read_only_mounts_of_any_path(subject: Subject) -> None:
    """A mount whose path has spaces, a colon and non-ASCII is readable and read-only."""
    probe = subject.probe()
    _expect(probe["ro_read"] == "grüße from the host\n", probe["ro_read"])
    _expect(probe["ro_write"] == "EROFS", probe["ro_write"])
    _expect(not (Path(probe["mount_dir"]) / "new-file").exists(), "the host folder was written")


# --- of runner, only the sandbox side, with its bytecode ----------------------------------------


def only_the_sandbox_side_of_runner(subject: Subject) -> None:
    """Of ``runner`` a sandbox gets only the sandbox-side packages, read-only."""
    seen: list[Any] = []
    spec = SandboxSpec(
        _run_id("look"),
        subject.image,
        ("python3", "-c", LOOK),
        mounts=tuple(subject.runner_mounts),
        env={"PYTHONPATH": RUNTIME_ROOT},
    )
    out = bytearray()
    with subject.backend.sandbox(spec) as box:
        seen.append(subject.backend.engine_mounts(box))
        for frame in box.frames(0.2):
            if frame is not None and frame[0] == STDOUT:
                out.extend(frame[1])
        state = box.wait(30)
    _expect(state.exit_code == 0, state)
    look = _json_line(bytes(out))
    _expect(look == {"entries": sorted(["__init__.py", *SANDBOX_PACKAGES]), "importable": []}, look)
    if seen[0] is None:
        return  # the engine reports no mounts: the view from inside is the check
    target = f"{RUNTIME_ROOT}/runner"
    of_runner = {d: (s, ro) for d, s, ro in seen[0] if d == target or d.startswith(target + "/")}
    expected = {f"{target}/__init__.py": resources.package_dir() / "__init__.py"}
    expected |= {f"{target}/{name}": resources.package_dir() / name for name in SANDBOX_PACKAGES}
    _expect(sorted(of_runner) == sorted(expected), sorted(of_runner))
    for destination, (source, read_only) in of_runner.items():
        _expect(Path(source) == expected[destination] and read_only, (destination, source))


def runtime_loads_from_the_mounted_bytecode(subject: Subject) -> None:
    """The runtime's modules load from the ``__pycache__`` the host prepared, not from source."""

    def python(*args: str) -> tuple[int, bytes, bytes]:
        spec = SandboxSpec(
            _run_id("pyc"),
            subject.image,
            ("python3", *args),
            mounts=tuple(subject.runner_mounts),
            env={"PYTHONPATH": RUNTIME_ROOT, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        state, out, err = run(subject.backend, spec, timeout_s=60)
        return state.exit_code, out, err

    code, out, err = python(
        "-c", "import json, sys; print(json.dumps(sys.implementation.cache_tag))"
    )
    _expect(code == 0, err[-2000:])
    if json.loads(out) != sys.implementation.cache_tag:
        raise NotApplicable(f"the image's Python ({out!r}) cannot use this host's bytecode")
    code, _, err = python("-v", "-c", RUNTIME_IMPORTS)
    _expect(code == 0, err[-4000:])
    loaded = re.findall(rb"^# code object from '?([^'\n]+)'?$", err, re.M)
    ours = [p.decode() for p in loaded if p.startswith(RUNTIME_ROOT.encode())]
    _expect(len(ours) > 40, f"only {len(ours)} runtime modules loaded")
    lone = f"{RUNTIME_ROOT}/runner/__init__.py"  # mounted as a file: no __pycache__ beside it
    from_source = [p for p in ours if not p.endswith(".pyc") and p != lone]
    _expect(from_source == [], from_source)


# --- limits ------------------------------------------------------------------------------------


def memory_limit(subject: Subject) -> None:
    """An allocation past the memory limit fails; ``oom_killed`` says so where reported."""
    spec = SandboxSpec(
        _run_id("oom"),
        subject.image,
        ("python3", "-c", "b = bytearray(256 * 1024 * 1024); print(len(b))"),
        limits=ResourceLimits(memory_mb=48),
    )
    state, out, _ = run(subject.backend, spec)
    _expect(out == b"" and state.exit_code != 0 and not state.killed_by_host, (state, out))
    if subject.backend.capabilities().reports_oom:
        _expect(state.oom_killed, state)  # the episode's status is then `oom`


def _program_json(subject: Subject, kind: str, program: str, limits: ResourceLimits) -> Any:
    """Run ``program`` (python3 -c) under ``limits``; it must exit 0: its JSON line."""
    spec = SandboxSpec(_run_id(kind), subject.image, ("python3", "-c", program), limits=limits)
    state, out, err = run(subject.backend, spec)
    _expect(state.exit_code == 0, (state, out, err))
    return _json_line(out)


def pids_limit(subject: Subject) -> None:
    """Threads past the pids limit are refused."""
    if not subject.backend.capabilities().pids_limit:
        raise NotApplicable(f"{subject.name} declares pids_limit=False")
    result = _program_json(subject, "pids", THREADS, ResourceLimits(pids_limit=32))
    _expect(result["refused"] is not None and result["started"] < 32, result)


def cpu_limit(subject: Subject) -> None:
    """The CPU limit is a CFS quota the sandbox's cgroup shows."""
    if not subject.backend.capabilities().cpu_limit:
        raise NotApplicable(f"{subject.name} declares cpu_limit=False")
    result = _program_json(subject, "cpus", CPU_QUOTA, ResourceLimits(cpus=0.5))
    _expect(abs(int(result["quota"]) / int(result["period"]) - 0.5) < 1e-6, result)


# --- the host's kill, the timeout and the lifetime cap ------------------------------------------


def timeout_is_a_host_kill(subject: Subject) -> None:
    """A sandbox that outlives ``wait``'s timeout is killed by the host, quickly."""
    spec = SandboxSpec(_run_id("timeout"), subject.image, ("sleep", "60"))
    started = time.monotonic()
    with subject.backend.sandbox(spec) as box:
        state = box.wait(0.5)
    _expect(state.killed_by_host and state.exit_code == 137 and not state.oom_killed, state)
    _expect(time.monotonic() - started < 10, "the kill took 10 s or more")


def kill_is_a_host_kill(subject: Subject) -> None:
    """``kill`` ends the sandbox and the exit state says the host did it."""
    spec = SandboxSpec(_run_id("kill"), subject.image, ("sleep", "60"))
    with subject.backend.sandbox(spec) as box:
        box.kill()
        state = box.wait(10)
    _expect(state.killed_by_host and state.exit_code == 137 and not state.oom_killed, state)


def lifetime_cap_ends_a_sandbox(subject: Subject) -> None:
    """The lifetime cap ends a sandbox the host waits on; the exit state says it ran to it."""
    spec = SandboxSpec(
        _run_id("cap"),
        subject.image,
        ("python3", "-c", "import time; time.sleep(3600)"),
        cap=LifetimeCap(2.0, grace_s=1.0),
    )
    started = time.monotonic()
    with subject.backend.sandbox(spec) as box:
        state = box.wait(60)  # the host would kill only after a minute
    elapsed = time.monotonic() - started
    _expect(not state.killed_by_host and state.exit_code == 137 and not state.oom_killed, state)
    _expect(state.ran_s is not None and 2.5 < state.ran_s < 6, state)
    _expect(elapsed < 15, elapsed)


# --- labels for the reaper, and cleanup -----------------------------------------------------------


@contextmanager
def _crashed_owner(subject: Subject) -> Iterator[str]:
    """A child process that started a sandbox, SIGKILLed: yields its session id."""
    session = f"crash-{uuid.uuid4().hex[:10]}"
    owner = CRASHING_OWNER.format(connect=subject.child_code)
    child = subprocess.Popen(
        [sys.executable, "-c", owner, session, subject.image], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        seen: list[str] = []
        for line in child.stdout:  # log lines may come first; EOF ends the loop
            seen.append(line.strip())
            if seen[-1] == "started" or len(seen) > 50:
                break
        _expect(seen and seen[-1] == "started", seen)
    finally:
        child.kill()  # SIGKILL: the owner dies without cleaning up
        child.wait(timeout=30)
    yield session


def reaper_removes_a_dead_owners_sandbox_only(subject: Subject) -> None:
    """The reaper removes a SIGKILLed owner's sandbox (measured) and never a live owner's."""
    with _crashed_owner(subject) as session:
        of_crashed = subject.connect(session)
        try:
            _expect(len(subject.leftovers(of_crashed)) == 1, subject.leftovers(of_crashed))
            live_spec = SandboxSpec(_run_id("live"), subject.image, ("sleep", "60"))
            with subject.backend.sandbox(live_spec) as live:
                reaper = subject.connect(f"reaper-{uuid.uuid4().hex[:6]}")
                try:
                    removed = reaper.reap()
                finally:
                    reaper.close()
                crashed = [r for r in removed if r.run_id == f"{session}-run"]
                _expect(len(crashed) == 1, removed)
                _expect(crashed[0].sandbox_s is not None and crashed[0].sandbox_s > 0, crashed)
                _expect(live.wait(0.5).killed_by_host, "a live owner's sandbox was reaped")
            _expect(subject.leftovers(of_crashed) == [], subject.leftovers(of_crashed))
        finally:
            of_crashed.close()


def removed_when_the_body_raises(subject: Subject) -> None:
    """A sandbox is removed when the body of its context raises."""
    spec = SandboxSpec(_run_id("raises"), subject.image, ("sleep", "60"))
    try:
        with subject.backend.sandbox(spec):
            _expect(len(subject.leftovers()) == 1, subject.leftovers())
            raise ZeroDivisionError
    except ZeroDivisionError:
        pass
    _expect(subject.leftovers() == [], subject.leftovers())


def nothing_of_the_session_remains(subject: Subject) -> None:
    """After sandboxes ran (the probe's), none of the backend's session is left."""
    subject.probe()
    _expect(subject.leftovers() == [], subject.leftovers())


SANDBOX_CHECKS: tuple[Callable[[Subject], None], ...] = (
    stdout_stderr_and_exit_code_apart,
    channel_carries_bytes_both_ways,
    no_route_out_but_loopback,
    dns_fails_fast,
    read_only_root_and_writable_tmp,
    non_root_without_capabilities,
    no_compilers_or_network_tools,
    only_the_specs_environment,
    read_only_mounts_of_any_path,
    only_the_sandbox_side_of_runner,
    runtime_loads_from_the_mounted_bytecode,
    memory_limit,
    pids_limit,
    cpu_limit,
    timeout_is_a_host_kill,
    kill_is_a_host_kill,
    lifetime_cap_ends_a_sandbox,
)
"""The checks of what one sandbox is and how it ends (no listing, no second process)."""

LIFECYCLE_CHECKS: tuple[Callable[[Subject], None], ...] = (
    reaper_removes_a_dead_owners_sandbox_only,
    removed_when_the_body_raises,
    nothing_of_the_session_remains,
)
"""The checks of leftovers: they list the session's sandboxes (`Backend.session_sandboxes`)
and kill an owner process (`Subject.child_code`)."""

CHECKS: tuple[Callable[[Subject], None], ...] = SANDBOX_CHECKS + LIFECYCLE_CHECKS
"""Every check, in the order the suite runs them (each name is its test id)."""
