"""The zygote's loop: take ``spawn`` requests, fork a fresh sandbox for each, report exits.

Standard library only, Python 3.9+. Started by the namespace backend as
``python3 -u -m runner.runtime --zygote`` inside one bwrap sandbox per key
(`runner.backends.namespace.zygote`; the isolation argument is `runner.runtime.zygote`'s).
It is the PID 1 of that sandbox and stays single-threaded (``unshare(CLONE_NEWUSER)`` refuses
a threaded caller, and a fork copies only the calling thread).

Sequence: read ``config`` (the children's environment, the layout, the seccomp filter), set
its environment to exactly ``config.env``, import the runtime's modules (`PRELOAD`, what a run
would import before its first tool call), freeze them out of the garbage collector (a child's
collections then do not copy the shared pages), say ``ready``; then serve: each ``spawn``
forks a child (`isolate.enter_namespaces` in it, then a second fork that
`isolate.become_sandbox` and runs the runtime's ``main`` or ``exec``s the command); the
zygote answers ``spawned`` with the child's pidfd, or ``failed``; every child's exit is
reported as ``exited``. End-of-file on the control socket (the host closed it or died) ends
the zygote, and with it, as the init of their PID namespaces' parent, every child it made.
"""

import contextlib
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.runtime.pid1 import ENV_HARD_CAP, ENV_IDLE_CAP, set_dumpable
from runner.runtime.worker.fork import close_fds_except
from runner.runtime.zygote import isolate
from runner.wire import zygote as wire

__all__ = ["PRELOAD", "Zygote", "preload", "serve"]

# What a run imports before its first tool call, imported once here (the runtime's ~70
# modules: ~90 ms of CPU per run before). Nothing here runs any code of a run.
PRELOAD = (
    "runner.runtime.main",
    "runner.runtime.manifest",
    "runner.runtime.worker.process",
    "runner.runtime.egress.seccomp",
    "runner.runtime.steps.program",
    "hashlib",
    "inspect",
)
_PID = struct.Struct("q")

Runtime = Callable[[], int]


def preload() -> None:
    """Import `PRELOAD` (the runtime's modules)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _noop(signum: int, frame: Any) -> None:
    """SIGCHLD's handler: the wake-up descriptor does the work."""


class Zygote:
    """The zygote's state: its control socket, its config and the children it forked.

    Args:
        control: the control socket (``SOCK_SEQPACKET``), its end of the host's pair.
        runtime: the runtime's ``main`` (``runner.runtime.__main__.main``), run in a child.
    """

    def __init__(self, control: socket.socket, runtime: Runtime) -> None:
        self.control = control
        self.runtime = runtime
        self.config: Dict[str, Any] = {}
        self.children: Dict[int, int] = {}  # pid -> spawn seq; nothing else of a run is kept
        # a first fork still entering its namespaces: its report pipe -> (seq, its pid)
        self.setting_up: Dict[int, Tuple[int, int]] = {}
        self.firsts: Dict[int, Optional[int]] = {}  # first forks not reaped: pid -> exit code
        self.unclaimed: Dict[int, int] = {}  # a child reaped before its first fork's report
        self._wake_r, self._wake_w = os.pipe()

    # --- the channel ----------------------------------------------------------------------

    def _send(self, message: Dict[str, Any], fds: Tuple[int, ...] = ()) -> None:
        data = json.dumps(message, separators=(",", ":")).encode("ascii")
        if fds:
            socket.send_fds(self.control, [data], list(fds))
        else:
            self.control.send(data)

    def _receive(self) -> Optional[Tuple[Dict[str, Any], List[int]]]:
        data, fds, flags, _ = socket.recv_fds(
            self.control, wire.MAX_MESSAGE_BYTES, wire.MAX_SPAWN_FDS
        )
        if not data and not fds:
            return None  # the host closed its end
        try:
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise ValueError("truncated message")
            message = json.loads(data.decode("ascii"))
            if not isinstance(message, dict):
                raise ValueError("not an object")
        except ValueError:
            for fd in fds:
                os.close(fd)
            raise
        return message, fds

    # --- life -----------------------------------------------------------------------------

    def start(self) -> None:
        """Take ``config``, become what children copy, say ``ready``.

        Raises:
            ValueError: the first message is not a ``config``.
        """
        got = self._receive()
        if got is None or got[0].get("op") != "config" or got[1]:
            raise ValueError("the zygote's first message must be its config")
        self.config = got[0]
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in self.config["env"].items()})
        preload()
        isolate.load()
        set_dumpable(False)  # no process of its uid reads the zygote's memory (/proc/PID/mem)
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, _noop)
        gc.freeze()
        gc.enable()  # off while its modules were imported (`runner.runtime.__main__`)
        version = ".".join(str(v) for v in sys.version_info[:3])
        self._send({"op": "ready", "pid": os.getpid(), "python": version})

    def serve(self) -> int:
        """Serve until the host closes the control socket; return the exit code."""
        while True:
            waiting: List[Any] = [self.control, self._wake_r, *self.setting_up]
            readable, _, _ = select.select(waiting, [], [])
            if self._wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
                self._reap()
            for fd in readable:
                if fd in self.setting_up:
                    self._reported(fd)
            if self.control in readable:
                got = self._receive()
                if got is None:
                    return 0
                message, fds = got
                if message.get("op") == "spawn":
                    self._spawn(message, fds)
                else:
                    for fd in fds:
                        os.close(fd)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            seq = self.children.pop(pid, None)
            if seq is not None:
                self._send({"op": "exited", "seq": seq, "code": code})
            elif pid in self.firsts:
                if any(pid == first for _, first in self.setting_up.values()):
                    self.firsts[pid] = code  # its report is still to be read
                else:
                    del self.firsts[pid]
            else:  # a child whose first fork's report is still to be read (`_reported`)
                self.unclaimed[pid] = code

    # --- one spawn ------------------------------------------------------------------------

    def _checked(self, message: Dict[str, Any], fds: List[int]) -> Optional[str]:
        """Why ``message`` with ``fds`` is not a spawn this zygote can make, or None."""
        group = message.get("group")
        argv = message.get("argv")
        wanted = wire.SPAWN_FDS + (len(self.config["cgroups"]) if group else 0)
        if not isinstance(message.get("seq"), int) or len(fds) != wanted:
            return "expected seq and {} descriptors, got {}".format(wanted, len(fds))
        if not isinstance(group, str) or not all(c.isalnum() or c == "-" for c in group):
            return "bad cgroup name"
        if argv is not None and not (
            isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
        ):
            return "bad argv"
        return None

    def _spawn(self, message: Dict[str, Any], fds: List[int]) -> None:
        problem = self._checked(message, fds)
        if problem is not None:
            for fd in fds:
                os.close(fd)
            self._send({"op": "failed", "seq": message.get("seq"), "code": -1, "error": problem})
            return
        report_r, report_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            self._child(message, fds, report_w)  # never returns
        os.close(report_w)
        for fd in fds:
            os.close(fd)
        # answered when the first fork reports its child (`_reported`): the zygote serves
        # other spawns meanwhile (joining a cgroup v1 group may wait for an RCU grace period)
        self.setting_up[report_r] = (message["seq"], pid)
        self.firsts[pid] = None

    def _reported(self, report_r: int) -> None:
        """A first fork wrote its child's pid (or closed its pipe: it failed); answer."""
        seq, first = self.setting_up.pop(report_r)
        data = os.read(report_r, _PID.size)  # one write of 8 bytes, or end of file
        os.close(report_r)
        if self.firsts.get(first) is not None:  # reaped already: nothing more to come of it
            del self.firsts[first]
        if len(data) == _PID.size:
            child = _PID.unpack(data)[0]
            ended = self.unclaimed.pop(child, None)
            if ended is not None:  # it set up, ran and ended before this report was read
                self._send({"op": "spawned", "seq": seq, "pid": child})
                self._send({"op": "exited", "seq": seq, "code": ended})
                return
            self.children[child] = seq
            pidfd = os.pidfd_open(child)  # a zombie at worst: it is not reaped before _reap
            try:
                self._send({"op": "spawned", "seq": seq, "pid": child}, (pidfd,))
            finally:
                os.close(pidfd)
            return
        code = self.firsts.pop(first, None)
        if code is None:
            _, status = os.waitpid(first, 0)
            code = os.waitstatus_to_exitcode(status)
        # the child said why on the run's own stderr (the host reads it there)
        self._send({"op": "failed", "seq": seq, "code": code, "error": "set-up failed"})

    def _child(self, message: Dict[str, Any], fds: List[int], report: int) -> None:
        """The first fork: the run's stdio, cgroups, namespaces; the second fork runs it."""
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for target, fd in enumerate(fds[: wire.SPAWN_FDS]):
                os.dup2(fd, target)
            procs = fds[wire.SPAWN_FDS :]
            close_fds_except([0, 1, 2, report, *procs])
            self.control.detach()  # its descriptor is closed: never close that number again
            isolate.join_cgroups(procs)
            set_dumpable(True)  # its own /proc/self/*_map must be its uid's to write
            isolate.enter_namespaces(
                int(self.config["uid"]),
                int(self.config["gid"]),
                [(int(r), int(v)) for r, v in message.get("rlimits") or []],
            )
            pid = os.fork()
            if pid:
                os.write(report, _PID.pack(pid))
                os._exit(0)
            os.close(report)
            isolate.become_sandbox(self.config, int(message["tmpfs_bytes"]), message["group"])
        except BaseException as exc:
            with contextlib.suppress(Exception):
                os.write(
                    2,
                    "sandbox-replay zygote: cannot set up the sandbox: {}\n".format(exc).encode(
                        "utf-8", "backslashreplace"
                    ),
                )
            os._exit(wire.EXIT_SETUP_FAILED)
        self._run(message)

    def _run(self, message: Dict[str, Any]) -> None:
        """In the sandbox, nothing of the zygote left: the runtime, or the command."""
        code = 70
        try:
            argv = message.get("argv")
            if argv is None:
                os.environ[ENV_HARD_CAP] = str(int(message["cap_s"]))
                idle = message.get("idle_cap_s")
                if idle is not None:  # a warm pool's: its cap until ``start`` assigns its run
                    os.environ[ENV_IDLE_CAP] = str(int(idle))
                code = self.runtime()
            else:
                env = {str(k): str(v) for k, v in (message.get("env") or {}).items()}
                os.execvpe(argv[0], argv, env)  # noqa: S606 - the sandbox's command, inside it
        except BaseException as exc:
            with contextlib.suppress(Exception):
                sys.stderr.write("sandbox-replay zygote: {!r}\n".format(exc))
            code = 127 if message.get("argv") is not None else 70
        _flush()
        os._exit(code)


def serve(control_fd: int, runtime: Runtime) -> int:
    """The zygote's whole life on the control socket ``control_fd``; its exit code."""
    control = socket.socket(fileno=control_fd)
    zygote = Zygote(control, runtime)
    try:
        zygote.start()
    except Exception as exc:
        sys.stderr.write("sandbox-replay zygote: cannot start: {!r}\n".format(exc))
        return 70
    return zygote.serve()
