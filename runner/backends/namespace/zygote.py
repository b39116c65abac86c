"""The host's end of one zygote: start it, ask it for sandboxes, hear their exits, close it.

A `Zygote` is one ``python3 -u -m runner.runtime --zygote`` in its own bwrap sandbox
(`runner.backends.namespace.zygoteargs`), started through the same launcher as a run's bwrap
(`runner.backends.namespace.launcher`: staging and the drop to the sandbox's uid as root, the
parent-death signal), from a thread of its own that lives as long as the zygote (the
parent-death signal follows the thread that started a process, not the process: started from
a run's thread, the zygote would die when that run's thread ended). The control channel is a
``SOCK_SEQPACKET`` pair (`runner.wire.zygote`): ``config`` goes first, then the zygote
says ``ready``; a reader thread takes its answers.

`Zygote.spawn` sends one ``spawn`` with the run's three pipe ends (and the run's
cgroup ``tasks`` files, opened here) and returns a `ZygoteChild`: the host's side of those
pipes and what `runner.backends.namespace.sandbox.NamespaceSandbox` needs of a process
(``poll``, ``wait``, ``send_signal``; the kill goes through a pidfd of the child, so it never
hits a reused pid). The child's exit status comes from the zygote (its parent) as ``exited``.

If the zygote ends (crashed, killed), every child it made ends with it (it is the init of the
PID namespace theirs are nested in): their `ZygoteChild.lost` names why, and the sandbox
reports an `InfrastructureError` (the episode ``infra_error``) instead of an exit code. A
``spawn`` the zygote never answered raises `ZygoteGone`: nothing of that run was started, and
the caller (`runner.backends.namespace.zygotes.Zygotes`) asks a fresh zygote.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from runner.errors import InfrastructureError
from runner.hostlog import get_logger
from runner.wire import zygote as wire

log = get_logger(__name__)

__all__ = ["SpawnRequest", "Zygote", "ZygoteChild", "ZygoteGone", "host_pid_of"]

READY_WAIT_S = 60.0  # the zygote's bwrap, interpreter and imports (~0.2 s idle; a loaded host)
SPAWN_WAIT_S = 60.0
_STDERR_TAIL = 4000


class ZygoteGone(InfrastructureError):
    """The zygote ended (or never answered) before it made the asked sandbox."""


@dataclass(frozen=True)
class SpawnRequest:
    """What one ``spawn`` asks for (nothing of a run's data: numbers, names, descriptors).

    Attributes:
        cap_s: the sandbox's lifetime cap, whole seconds (``SANDBOX_REPLAY_HARD_CAP_S``).
        idle_cap_s: a warm pool's sandbox's cap while it waits for its run, whole seconds
            (``SANDBOX_REPLAY_IDLE_CAP_S``), or None (not pooled): pooled and unpooled
            sandboxes of one key share a zygote.
        tmpfs_bytes: the size of its ``/tmp`` and ``/dev/shm``.
        rlimits: ``(resource, value)`` pairs set before its namespaces (no cgroups).
        group: its cgroup folders' name ("" without cgroups).
        procs: the ``tasks`` file of each controller's group (opened by the caller, in the
            order of the zygote's ``config.cgroups``; closed by `Zygote.spawn`).
        argv: a command to ``exec`` inside (None: the zygote's runtime).
        env: that command's environment (None with the runtime: the zygote's own).
    """

    cap_s: int
    tmpfs_bytes: int
    idle_cap_s: int | None = None
    rlimits: Sequence[tuple[int, int]] = ()
    group: str = ""
    procs: Sequence[int] = ()
    argv: Sequence[str] | None = None
    env: Mapping[str, str] | None = None

    def message(self, seq: int) -> dict[str, Any]:
        """The ``spawn`` message (`runner.wire.zygote`)."""
        return {
            "op": "spawn",
            "seq": seq,
            "cap_s": self.cap_s,
            "idle_cap_s": self.idle_cap_s,
            "tmpfs_bytes": self.tmpfs_bytes,
            "rlimits": [list(pair) for pair in self.rlimits],
            "group": self.group,
            "argv": list(self.argv) if self.argv is not None else None,
            "env": dict(self.env) if self.env is not None else None,
        }


def host_pid_of(pidfd: int) -> int:
    """The pid, in this process's PID namespace, of the process ``pidfd`` refers to (0: gone).

    From ``/proc/self/fdinfo/<pidfd>``'s ``Pid:`` line (Linux 5.3+; -1 once it was reaped).
    """
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Pid:"):
                    return max(0, int(line.split()[1]))
    except (OSError, ValueError):
        pass
    return 0


class ZygoteChild:
    """One sandbox a zygote forked, with the host's ends of its stdio.

    Attributes:
        pid: its pid on the host (0 until spawned, or when unknown).
        stdin, stdout, stderr: the host's ends of its pipes.
        returncode: its exit code (negative: a signal), None while it runs.
        lost: why its exit status is unknown (its zygote ended first), or None.
    """

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.pid = 0
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr
        self.returncode: int | None = None
        self.lost: str | None = None
        self.spawned = False  # the zygote made it (False: set-up failed, or not answered yet)
        self.zygote_pid = 0  # its pid as the zygote sees it
        self._pidfd: int | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()

    def _bind(self, pidfd: int | None, seen_as: int) -> None:
        with self._lock:
            self._pidfd = pidfd
            self.pid = host_pid_of(pidfd) if pidfd is not None else 0
            self.spawned = True
            self.zygote_pid = seen_as

    def _exited(self, code: int, lost: str | None = None) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            self.returncode, self.lost = code, lost
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        self._done.set()

    def poll(self) -> int | None:
        """The exit code, or None while the sandbox runs."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code.

        Raises:
            subprocess.TimeoutExpired: not ended within ``timeout`` seconds.
        """
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("zygote child", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` through the child's pidfd (nothing once it ended)."""
        with self._lock:
            if self.returncode is None and self._pidfd is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self._pidfd, sig)


@dataclass
class _Pending:
    child: ZygoteChild
    answered: threading.Event = field(default_factory=threading.Event)
    failed: str | None = None


class Zygote:
    """One zygote process and its control channel.

    Args:
        argv: the zygote's whole argv but the control descriptor's number (launcher, bwrap,
            ``python3 -u -m runner.runtime --zygote``), which `start` appends.
        env: the environment it starts with (the children's: `runner.backends.capping`).
        config: the ``config`` message (`runner.wire.zygote`).
        preexec: the launcher's ``preexec_fn`` (`runner.backends.namespace.launcher`).
        name: for logs and errors.
    """

    def __init__(
        self,
        argv: Callable[[int], list[str]],
        env: Mapping[str, str],
        config: Mapping[str, Any],
        preexec: Callable[[], None],
        name: str,
    ) -> None:
        self._argv, self._env, self._config, self._preexec = argv, dict(env), config, preexec
        self.name = name
        self.pid: int | None = None
        self.ready: dict[str, Any] = {}
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr = b""
        self._seq = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._children: dict[int, ZygoteChild] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._gone: str | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None

    @property
    def busy(self) -> bool:
        """Whether sandboxes of this zygote still run (or are being made)."""
        with self._lock:
            return bool(self._children or self._pending)

    @property
    def alive(self) -> bool:
        """Whether the zygote still serves (its control channel is open)."""
        return self._gone is None and self._control is not None

    # --- start ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the zygote and wait for its ``ready``.

        Raises:
            InfrastructureError: it could not start or did not say ``ready`` in time (its
                stderr attached).
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        keeper = threading.Thread(
            target=self._keep, args=(theirs,), name=f"zygote-{self.name}", daemon=True
        )
        keeper.start()
        self._started.wait()
        theirs.close()
        if self._start_error is not None:
            ours.close()
            raise InfrastructureError(
                f"cannot start the namespace zygote: {self._start_error}"
            ) from self._start_error
        self._control = ours
        try:
            self._send(dict(self._config))
            ours.settimeout(READY_WAIT_S)
            data = ours.recv(wire.MAX_MESSAGE_BYTES)
            ours.settimeout(None)
            ready = json.loads(data.decode("ascii")) if data else {}
            if not isinstance(ready, dict) or ready.get("op") != "ready":
                raise OSError("no ready from the zygote")
        except (OSError, ValueError) as exc:
            self.close()
            keeper.join(READY_WAIT_S)  # its stderr read to the end
            code = self._process.returncode if self._process is not None else None
            raise InfrastructureError(
                f"bwrap could not set up the sandbox's namespace zygote {self.name}"
                f" (exit {code}): {self._stderr_text()}"
            ) from exc
        self.ready = ready
        threading.Thread(target=self._read, name=f"zygote-{self.name}-reader", daemon=True).start()
        log.debug("zygote_ready", zygote=self.name, pid=self.pid, python=ready.get("python"))

    def _keep(self, theirs: socket.socket) -> None:
        """The keeper thread: start the zygote (its parent-death thread), then wait for it."""
        try:
            self._process = subprocess.Popen(
                self._argv(theirs.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=self._env,
                cwd="/",
                start_new_session=True,
                pass_fds=(theirs.fileno(),),
                preexec_fn=self._preexec,
            )
            self.pid = self._process.pid
        except (OSError, subprocess.SubprocessError) as exc:
            self._start_error = exc
            self._started.set()
            return
        self._started.set()
        stderr = self._process.stderr
        assert stderr is not None
        for chunk in iter(lambda: os.read(stderr.fileno(), 4096), b""):
            self._stderr = (self._stderr + chunk)[-_STDERR_TAIL:]
        code = self._process.wait()
        self._lose(f"the namespace zygote {self.name} ended (exit {code})")

    def _stderr_text(self) -> str:
        text = self._stderr.decode("utf-8", "backslashreplace").strip()
        return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)[-1000:] or "none"

    # --- the channel ----------------------------------------------------------------------

    def _send(self, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        data = json.dumps(message, separators=(",", ":")).encode("ascii")
        control = self._control
        if control is None:
            raise OSError("the zygote's control socket is closed")
        with self._send_lock:
            if fds:
                socket.send_fds(control, [data], list(fds))
            else:
                control.send(data)

    def _read(self) -> None:
        control = self._control
        while control is not None:
            try:
                data, fds, _, _ = socket.recv_fds(control, wire.MAX_MESSAGE_BYTES, 1)
            except OSError:
                break
            if not data:
                for fd in fds:
                    os.close(fd)
                break
            try:
                message = json.loads(data.decode("ascii"))
                self._on_message(message, fds)
            except (ValueError, TypeError, KeyError) as exc:  # the zygote is ours: a bug
                log.warning("zygote_message_malformed", zygote=self.name, error=str(exc))
                for fd in fds:
                    os.close(fd)
        self._lose(f"the namespace zygote {self.name} closed its channel")

    def _on_message(self, message: dict[str, Any], fds: list[int]) -> None:
        op, seq = message.get("op"), int(message.get("seq") or 0)
        with self._lock:
            pending = self._pending.pop(seq, None) if op in ("spawned", "failed") else None
            child = self._children.get(seq)
        if op == "spawned" and pending is not None and len(fds) <= 1:
            # no pidfd: the child ended before the zygote answered (its ``exited`` follows)
            pending.child._bind(fds[0] if fds else None, int(message.get("pid") or 0))
            pending.answered.set()
            return
        for fd in fds:
            os.close(fd)
        if op == "failed" and pending is not None:
            pending.child._exited(int(message.get("code", -1)))
            pending.failed = str(message.get("error", ""))
            pending.answered.set()
        elif op == "exited" and child is not None:
            with self._lock:
                self._children.pop(seq, None)
            child._exited(int(message["code"]))

    def _lose(self, why: str) -> None:
        """The zygote is gone: every unanswered spawn and every running child learns why."""
        with self._lock:
            if self._gone is None:
                self._gone = why
                log.info("zygote_gone", zygote=self.name, reason=why)
            pending, children = list(self._pending.values()), list(self._children.values())
            self._pending.clear()
            self._children.clear()
        for each in pending:
            each.answered.set()
        for child in children:
            child._exited(-signal.SIGKILL, lost=why)

    # --- spawn ----------------------------------------------------------------------------

    def spawn(self, request: SpawnRequest) -> ZygoteChild:
        """Ask the zygote for one sandbox; its stdio are new pipes whose host ends it returns.

        The request's ``procs`` descriptors are closed here, whatever happens.

        Raises:
            ZygoteGone: the zygote is gone or ended before it answered (nothing was started:
                ask another).
        """
        ends: list[int] = []
        try:
            in_r, in_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            ends = [in_r, in_w, out_r, out_w, err_r, err_w]
            child = ZygoteChild(
                os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")
            )
            ends = [in_r, out_w, err_w]  # ours now belong to the child object
            with self._lock:
                if self._gone is not None:
                    raise ZygoteGone(self._gone)
                seq = next(self._seq)
                pending = _Pending(child)
                self._pending[seq] = pending
                self._children[seq] = child
            try:
                self._send(request.message(seq), [in_r, out_w, err_w, *request.procs])
            except OSError as exc:
                self._forget(seq)
                raise ZygoteGone(f"cannot reach the namespace zygote {self.name}: {exc}") from exc
        finally:
            for fd in [*ends, *request.procs]:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if not pending.answered.wait(SPAWN_WAIT_S):
            self._forget(seq)
            raise ZygoteGone(f"the namespace zygote {self.name} did not answer in time")
        if not child.spawned and (child.returncode is None or child.lost is not None):
            self._forget(seq)  # the zygote went before answering: nothing of the run started
            raise ZygoteGone(self._gone or f"the namespace zygote {self.name} is gone")
        return child

    def _forget(self, seq: int) -> None:
        with self._lock:
            self._pending.pop(seq, None)
            child = self._children.pop(seq, None)
        if child is not None:
            for handle in (child.stdin, child.stdout, child.stderr):
                if handle is not None:
                    with contextlib.suppress(OSError):
                        handle.close()

    # --- end ------------------------------------------------------------------------------

    def close(self, wait_s: float = 5.0) -> None:
        """End the zygote (and every sandbox it still runs): close its channel, then wait.

        SIGKILL when it has not ended within ``wait_s`` seconds.
        """
        control, self._control = self._control, None
        if control is not None:
            with contextlib.suppress(OSError):
                control.shutdown(socket.SHUT_RDWR)
            control.close()
        process = self._process
        if process is not None:
            try:
                process.wait(wait_s)
            except subprocess.TimeoutExpired:
                process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(wait_s)
        self._lose(f"the namespace zygote {self.name} was closed")
