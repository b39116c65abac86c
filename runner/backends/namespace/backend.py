"""`NamespaceBackend`: one namespace sandbox per run attempt, no container engine (Linux).

Lifecycle of `NamespaceBackend.sandbox`: the image's root filesystem (cached by image id,
`runner.backends.namespace.rootfs`) -> the record (``O_EXCL``: a retry never makes a second
sandbox, `runner.backends.namespace.records`) -> the cgroups with the limits
(`runner.backends.namespace.cgroups`) -> the sandbox's start -> body -> kill if still running
-> exit state (the OOM counter read before the groups go) -> remove the cgroups and the record.
Teardown runs in ``finally``: also when the start fails half-way or the body raises.

Two ways to start a sandbox (``start``; `START_MODES`, setting ``SANDBOX_REPLAY_NAMESPACE_START``):
``zygote``: a fork of the key's zygote (`runner.backends.namespace.
zygotes`, `runner.runtime.zygote`) that enters fresh namespaces and pivots into the run's
read-only root itself: the runtime is forked already imported (a command other than the
runtime is ``exec``ed there); ``bwrap``: ``/bin/sh`` launcher -> ``bwrap``
(`runner.backends.namespace.bwrapargs`) with piped stdio, one interpreter started per run.
Both give the same sandbox (the conformance suite and the attack battery run both).

The environment inside is the image's ``Env`` plus the spec's (`runner.backends.capping`):
nothing of the host's. bwrap runs unprivileged as the sandbox's own host uid: as root the
launcher stages the sources and drops to the spec's uid (10001) first
(`runner.backends.namespace.launcher`); as another user, it runs as that user, which is then
the spec's (`runner.backends.base.sandbox_user`).

Every process of the sandbox runs under a seccomp filter like Docker's default profile
(`runner.backends.namespace.seccomp`; x86-64 only).

Where it differs from Docker (the conformance suite's `Capabilities`): without usable cgroups
the limits are rlimits, an OOM kill is not reported and CPU is not limited.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from runner import __version__
from runner.backends import labels as L
from runner.backends.base import (
    Capabilities,
    Reaped,
    SandboxSpec,
)
from runner.backends.capacity import Bound
from runner.backends.capping import CAP_ENV, capped_command, sandbox_environment
from runner.backends.namespace import seccomp
from runner.backends.namespace.bwrapargs import bwrap_argv
from runner.backends.namespace.cgroups import Cgroups, Host, probe_host
from runner.backends.namespace.launcher import Staging, launcher_argv, launcher_preexec, rlimits
from runner.backends.namespace.records import (
    read_records,
    reap_records,
    sweep_groups,
    update_record,
    write_record,
)
from runner.backends.namespace.rootfs import RootFs, image_rootfs, sweep_partials
from runner.backends.namespace.sandbox import NamespaceSandbox, SandboxProcess
from runner.backends.namespace.zygote import SpawnRequest, Zygote
from runner.backends.namespace.zygoteargs import zygote_argv
from runner.backends.namespace.zygotes import ZygoteKey, Zygotes
from runner.backends.warmpool.pooled import PoolingBackend
from runner.errors import InfrastructureError
from runner.hostlog import get_logger
from runner.wire.env import ENV_IDLE_CAP
from runner.wire.protocol import RUNTIME_ROOT
from runner.wire.zygote import CGROUP_DIR, RUNTIME_ARGV, TEMPLATE_ROOT

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions
    from runner.settings import Settings

log = get_logger(__name__)

__all__ = ["START_MODES", "NamespaceBackend"]

START_MODES = ("zygote", "bwrap")
_ZYGOTE_ENV = {"PYTHONPATH": RUNTIME_ROOT, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
_MIB = 1024 * 1024


def _pidfds() -> bool:
    """Whether this kernel gives pidfds (``pidfd_open``, Linux 5.3+).

    A zygote's children are signalled and named through them (`runner.backends.namespace.zygote`).
    """
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return False
    try:
        os.close(opener(os.getpid()))
    except OSError:
        return False
    return True


class NamespaceBackend(PoolingBackend):
    """Sandboxes as bubblewrap namespaces over the image's read-only root filesystem.

    Args:
        root: the backend's folder (``STATE_DIR/namespace``): ``rootfs/`` (the image trees by
            id) and ``sandboxes/`` (one record per live sandbox).
        rootfs: a root filesystem folder to use for every image instead of exporting the
            Docker image (the offline debootstrap tree).
        docker_host: the engine the image is exported from the first time (None: the docker
            SDK's default).
        session_id: labels every sandbox of this backend; default a fresh random id.
        owner: the owning process (default: this one).
        bwrap: the bwrap executable (default: ``bwrap`` on ``PATH``).
        host: the probed limits of this host (default: `probe_host`).
        start: how sandboxes start, one of `START_MODES` (module docstring); ``zygote``
            falls back to ``bwrap`` on a kernel without ``pidfd_open`` (before Linux 5.3).

    Raises:
        InfrastructureError: bwrap is not installed (the message names the fix).
        ValueError: ``start`` is not one of `START_MODES`.
    """

    name = "namespace"

    def __init__(
        self,
        root: Path,
        *,
        rootfs: Path | None = None,
        docker_host: str | None = None,
        session_id: str | None = None,
        owner: L.Owner | None = None,
        bwrap: str | None = None,
        host: Host | None = None,
        start: str = "zygote",
    ) -> None:
        if start not in START_MODES:
            raise ValueError(f"namespace start must be one of {START_MODES}, not {start!r}")
        found = bwrap or shutil.which("bwrap")
        if not found:
            raise InfrastructureError(
                "--backend namespace needs bubblewrap: apt-get install -y bubblewrap"
                " (or your distribution's bubblewrap package)"
            )
        self.bwrap = found
        self.setpriv = shutil.which("setpriv") is not None
        self.root = root.resolve()
        self.rootfs_folder = rootfs
        self.docker_host = docker_host
        self.session_id = session_id or uuid.uuid4().hex[:16]
        self.owner = owner or L.current_owner()
        self.host = host if host is not None else probe_host()
        self._trees: dict[str, RootFs] = {}
        self._filter = seccomp.program()
        self._lock = threading.Lock()
        if start == "zygote" and not _pidfds():
            log.warning("namespace_start_bwrap", reason="no pidfd_open (Linux 5.3+) here")
            start = "bwrap"
        self.start = start
        self.zygotes = Zygotes(self._make_zygote)

    @property
    def warm_pool(self) -> bool:
        """Whether ``submit`` keeps a warm pool of its sandboxes: zygote starts with cgroups.

        With rlimits every sandbox shares one ``RLIMIT_NPROC`` count (`concurrency_bounds`:
        one sandbox at a time), which a warm spare's processes would take from the running one.
        A zygote's fork is cheap, but its set-up and the runtime's ``hello`` still take ~15-20
        ms a run would wait for (bench/README.md, ``bench_speed.py``): spares save that.
        """
        return self.start == "zygote" and self.host.cgroups

    @classmethod
    def from_settings(
        cls, settings: Settings, options: BackendOptions | None = None
    ) -> NamespaceBackend:
        """The registry's factory: a backend in ``STATE_DIR/namespace``.

        Reads ``state_dir``, ``namespace_rootfs``, ``docker_host`` (the engine the image's
        root filesystem is exported from) and ``namespace_start`` (`START_MODES`);
        ``options.session_id`` labels its sandboxes.

        Raises:
            InfrastructureError: bwrap is not installed (exit 6, the message names the fix).
        """
        return cls(
            settings.state_dir / "namespace",
            rootfs=settings.namespace_rootfs,
            docker_host=settings.docker_host,
            session_id=options.session_id if options is not None else None,
            start=settings.namespace_start,
        )

    @property
    def records(self) -> Path:
        """``ROOT/sandboxes``: one record per live sandbox."""
        return self.root / "sandboxes"

    def capabilities(self) -> Capabilities:
        """Which limits this host enforces (`runner.backends.namespace.cgroups.Host`)."""
        return Capabilities(**self.host.capabilities())

    def concurrency_bounds(self) -> tuple[Bound, ...]:
        """Without cgroups, one sandbox at a time (`Backend.concurrency_bounds`).

        The rlimit fallback's ``RLIMIT_NPROC`` counts every process of the sandbox's uid, and
        every sandbox runs as the same uid (the user's own; 10001 as root): a fork bomb in one
        sandbox would take the process slots of every other. The plan shows
        this bound with its reason.
        """
        if self.host.cgroups:
            return ()
        why = (
            "namespace backend with rlimits: RLIMIT_NPROC is shared by every sandbox of one"
            f" uid, so one sandbox at a time ({self.host.reason})"
        )
        return (Bound("rlimits", 1, why),)

    def close(self) -> None:
        """Close the zygotes (every sandbox they still run ends with them)."""
        self.zygotes.close()

    # -- the image -------------------------------------------------------------------------

    def rootfs(self, image: str) -> RootFs:
        """The root filesystem of ``image``, exported from the local engine on first use.

        Raises:
            InfrastructureError: the engine is unreachable, the image is missing, or its tar
                broke a rule (`runner.backends.namespace.rootfs`).
        """
        with self._lock:
            known = self._trees.get(image)
            if known is not None:
                return known
            if self.rootfs_folder is not None:
                made = RootFs.from_folder(self.rootfs_folder)
            else:
                made = self._export(image)
            self._trees[image] = made
            return made

    def _export(self, image: str) -> RootFs:
        # lazy: the docker SDK (~0.14 s) is needed only the first time an image is seen
        from runner.backends.docker.client import connect, translate

        api = connect(self.docker_host)
        try:
            return image_rootfs(api, image, self.root / "rootfs")
        except InfrastructureError:
            raise
        except Exception as exc:  # the SDK's errors, translated at its one boundary
            raise translate(exc, f"export the root filesystem of {image}") from exc
        finally:
            api.close()

    def image_id(self, image: str) -> str:
        """The image id of ``image`` (for the trace's environment manifest)."""
        return self.rootfs(image).image_id

    def engine_cpus(self) -> float | None:
        """This machine's CPU count (the most a CFS quota can give)."""
        return float(os.cpu_count() or 1)

    def engine_memory_bytes(self) -> int | None:
        """This machine's memory in bytes (the concurrency's budget), or None when unknown."""
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) or None
        except (ValueError, OSError):
            return None

    # -- the lifecycle ---------------------------------------------------------------------

    def _environment(self, spec: SandboxSpec, tree: RootFs) -> dict[str, str]:
        return {**tree.env, **sandbox_environment(spec)}

    def _seccomp_pipe(self) -> int | None:
        """A pipe's read end holding the seccomp filter (`seccomp.program`); None: no filter."""
        if self._filter is None:
            return None
        read, write = os.pipe()
        try:
            os.write(write, self._filter)  # 600 bytes: far below a pipe's buffer
        finally:
            os.close(write)
        return read

    def _staging(self, spec: SandboxSpec, tree: RootFs) -> Staging | None:
        """As root: bwrap runs as the sandbox's uid over staged sources (`launcher`).

        Raises:
            InfrastructureError: root without util-linux ``setpriv`` (bwrap would run as root).
        """
        if os.geteuid() != 0:
            return None
        if not self.setpriv:
            raise InfrastructureError(
                "--backend namespace as root needs util-linux setpriv (and unshare, mount) to"
                " run bwrap as the sandbox user: apt-get install -y util-linux"
            )
        uid, _, gid = spec.user.partition(":")
        sources = [tree.tree, *(Path(m.source) for m in spec.mounts)]
        return Staging(sources, uid, gid or uid)

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[NamespaceSandbox]:
        """Start one sandbox for ``spec``; kill, read its state and clean up on exit.

        Raises:
            InfrastructureError: bwrap or the image is unusable, a sandbox of this run id
                exists, or the sandbox failed to start (its output attached).
        """
        tree = self.rootfs(spec.image)
        name = L.container_name(spec.run_id, self.session_id)
        labels = L.sandbox_labels(
            session_id=self.session_id,
            run_id=spec.run_id,
            owner=self.owner,
            version=__version__,
            extra=spec.labels,
        )
        record = {"labels": labels, "started": time.time(), "cap_s": spec.hard_cap.total_s}
        try:
            record_path = write_record(self.records, name, record)
        except FileExistsError as exc:
            raise InfrastructureError(
                f"a sandbox named {name} already exists: run attempt ids must be unique",
                run_id=spec.run_id,
            ) from exc
        groups: Cgroups | None = None
        box: NamespaceSandbox | None = None
        try:
            if self.host.cgroups:
                # a zygote is told its run's group by name: a random one, nothing of the run
                group = name if self.start == "bwrap" else f"zg-{uuid.uuid4().hex[:24]}"
                groups = Cgroups(self.host, group, spec.limits)
                record["cgroups"] = [str(p) for p in groups.paths.values()]
                update_record(record_path, record)
            process: SandboxProcess
            if self.start == "zygote":
                process = self._from_zygote(spec, tree, groups)
            else:
                process = self._from_bwrap(spec, tree, groups, name)
            box = NamespaceSandbox(
                name,
                spec.run_id,
                process,
                oom_killed=groups.oom_killed if groups is not None else (lambda: False),
                kill_rest=groups.kill_all if groups is not None else (lambda: None),
            )
            if process.pid:  # 0: a zygote's child that could not be set up (its stderr says)
                record.update({"pid": process.pid, "pid_start": L.process_start_time(process.pid)})
                update_record(record_path, record)
            log.debug("namespace_sandbox_started", sandbox=name, run_id=spec.run_id)
            yield box
        finally:
            self._teardown(box, groups, record_path)

    def _from_bwrap(
        self, spec: SandboxSpec, tree: RootFs, groups: Cgroups | None, name: str
    ) -> SandboxProcess:
        """Start ``spec`` as its own launcher and bwrap (``start="bwrap"``)."""
        staging = self._staging(spec, tree)
        filter_fd = self._seccomp_pipe()
        argv = [
            *launcher_argv(groups, staging, setpriv=self.setpriv),
            *bwrap_argv(
                self.bwrap,
                spec,
                tree.tree,
                hostname="sandbox",
                cgroup_dirs=groups.paths if groups is not None else None,
                seen_as=staging.seen_as if staging is not None else str,
                seccomp_fd=filter_fd,
            ),
        ]
        try:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._environment(spec, tree),
                cwd="/",
                start_new_session=True,
                pass_fds=() if filter_fd is None else (filter_fd,),
                preexec_fn=launcher_preexec(None if groups is not None else spec.limits),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise InfrastructureError(
                f"cannot start bwrap for {name}: {exc}", run_id=spec.run_id
            ) from exc
        finally:
            if filter_fd is not None:
                os.close(filter_fd)

    # -- the zygotes -----------------------------------------------------------------------

    @staticmethod
    def _runtime(spec: SandboxSpec) -> bool:
        """Whether ``spec`` runs the runtime, which a zygote forks instead of executing."""
        return spec.init and tuple(spec.command) == RUNTIME_ARGV

    def _zygote_key(self, spec: SandboxSpec, tree: RootFs) -> ZygoteKey:
        env = self._environment(spec, tree)
        for each in (CAP_ENV, ENV_IDLE_CAP):  # each sandbox's own (SpawnRequest), not the key's
            env.pop(each, None)
        return ZygoteKey(
            tree=str(tree.tree),
            mounts=tuple(spec.mounts),
            user=spec.user,
            workdir=spec.workdir,
            # a command is exec'd with its own environment: the zygote's matters to the runtime
            env=tuple(sorted(env.items())) if self._runtime(spec) else (),
        )

    def _make_zygote(self, key: ZygoteKey) -> Zygote:
        """A zygote, not started, for the sandboxes of ``key`` (`zygoteargs`)."""
        tree = self._tree_of(key.tree)
        template = SandboxSpec(
            run_id="zygote",
            image="",
            command=RUNTIME_ARGV,
            mounts=key.mounts,
            user=key.user,
            workdir=key.workdir,
        )
        staging = self._staging(template, tree)
        bases = self.host.bases if self.host.cgroups else None
        uid, _, gid = key.user.partition(":")

        def argv(control_fd: int) -> list[str]:
            return [
                *launcher_argv(None, staging, setpriv=self.setpriv),
                *zygote_argv(
                    self.bwrap,
                    template,
                    tree.tree,
                    control_fd=control_fd,
                    cgroup_bases=bases,
                    seen_as=staging.seen_as if staging is not None else str,
                ),
            ]

        # a command's zygote: its own interpreter's environment (each command gets the spec's)
        env = dict(key.env) or {**tree.env, **sandbox_environment(template), **_ZYGOTE_ENV}
        env.pop(CAP_ENV, None)
        config = {
            "op": "config",
            "env": env,
            "root": TEMPLATE_ROOT,
            "cgroup_dir": CGROUP_DIR,
            "cgroups": list(bases or {}),
            "uid": int(uid),
            "gid": int(gid or uid),
            "hostname": "sandbox",
            "workdir": key.workdir,
            "seccomp": self._filter.hex() if self._filter is not None else "",
        }
        name = f"{self.session_id}-{self.zygotes.started + 1}"
        return Zygote(argv, env, config, launcher_preexec(None), name)

    def _tree_of(self, folder: str) -> RootFs:
        with self._lock:
            for tree in self._trees.values():
                if str(tree.tree) == folder:
                    return tree
        raise InfrastructureError(f"no image tree at {folder}")

    def _from_zygote(
        self, spec: SandboxSpec, tree: RootFs, groups: Cgroups | None
    ) -> SandboxProcess:
        """Fork ``spec``'s sandbox from its key's zygote (``start="zygote"``)."""
        runtime = self._runtime(spec)
        env = self._environment(spec, tree)

        def request() -> SpawnRequest:
            procs = []
            try:
                for path in groups.tasks_files() if groups is not None else []:
                    procs.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
            except OSError as exc:
                for fd in procs:
                    os.close(fd)
                raise InfrastructureError(f"cannot open the sandbox's cgroup: {exc}") from exc
            idle = spec.env.get(ENV_IDLE_CAP)  # a warm pool's sandbox (`pooled_spec`)
            return SpawnRequest(
                cap_s=spec.hard_cap.whole_s,
                idle_cap_s=int(idle) if idle is not None and idle.isdigit() else None,
                tmpfs_bytes=spec.limits.tmpfs_mb * _MIB,
                rlimits=() if groups is not None else tuple(rlimits(spec.limits).items()),
                group=groups.name if groups is not None else "",
                procs=procs,
                argv=None if runtime else capped_command(spec),
                env=None if runtime else env,
            )

        try:
            return self.zygotes.spawn(self._zygote_key(spec, tree), request)
        except InfrastructureError as exc:
            raise InfrastructureError(str(exc), run_id=spec.run_id) from exc

    def _teardown(
        self, box: NamespaceSandbox | None, groups: Cgroups | None, record_path: Path
    ) -> None:
        try:
            if box is not None:
                if box.exit_state is None:
                    box.kill()
                    with suppress(InfrastructureError):
                        box.wait(0)
                box.close()
        finally:
            if groups is not None:
                groups.remove()
            record_path.unlink(missing_ok=True)

    # -- leftovers -------------------------------------------------------------------------

    def sandboxes(self, *, session_only: bool = False) -> list[str]:
        """Names of the recorded sandboxes (of this session only, or of every session)."""
        names = []
        for path, record in read_records(self.records):
            if record is None:
                continue
            if session_only and record["labels"].get(L.SESSION) != self.session_id:
                continue
            names.append(path.stem)
        return names

    def session_sandboxes(self) -> list[str]:
        """Names of this session's recorded sandboxes."""
        return self.sandboxes(session_only=True)

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        """Remove the sandboxes of dead owners, their cgroups and unfinished image trees.

        See `runner.backends.namespace.records`; a live owner's sandbox is never touched.
        """
        bases = list(self.host.bases.values())
        removed = reap_records(self.records, self.owner.host, bases, ledger=ledger)
        sweep_groups(bases, set(self.sandboxes()))
        sweep_partials(self.root / "rootfs")
        return removed
