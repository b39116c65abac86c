"""The outbound-destination log: an audit hook in the runtime and in every Python child.

Standard library only, Python 3.9+. `install` is called explicitly by the runtime (its own
interpreter may run with ``-I``); ``runner/runtime/egress/site/sitecustomize.py`` calls
`install_from_env` in every Python child, because the runtime puts that folder first on the
children's ``PYTHONPATH`` (`child_environment`).

What the hook reports (DOCKER-NOTES.md lists what a hook sees):
- ``egress`` ``{"attempt": {kind, host, address, port, resolved_from, outcome, pid, event, ...}}``
  for ``socket.getaddrinfo``/``gethostbyname*``/``gethostbyaddr`` (kind ``dns``),
  ``socket.connect`` (``connect``), ``socket.sendto``/``sendmsg`` (``sendto``/``sendmsg``),
  ``http.client.connect`` (``http``) and ``urllib.Request`` (``url``).
- ``coverage`` ``{"partial": true, reason, program|library, pid}`` for a child that is not
  Python (``subprocess.Popen``, ``os.system``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``),
  a Python child that will not load the hook (``-I``/``-E``/``-S``, or an environment without
  our ``PYTHONPATH``), and ctypes (``ctypes.dlopen`` of a named library, ``ctypes.dlsym``).
  ``import ctypes`` alone opens the main program (``dlopen(None)``), which is not reported.

Decisions, documented because a hook cannot see everything:
- ``outcome`` is always ``"attempted"``: a hook runs *before* the operation and sees no result.
  The error (if any) surfaces in the tool as usual; the namespace (no network) is the
  measurement, this log names the destination.
- ``resolved_from`` is the name looked up just before, in the same thread, for the same port,
  when the connect address differs from it (``socket.create_connection`` does exactly that).
- A ``os.system``/``sh -c`` command is classified by its first word: ``sh -c "python3 x.py"``
  counts as a Python child; anything else is reported with the command as ``program``.
- The hook never raises (that would fail the audited operation), ignores its own events.
- Destinations, not attempts, are logged (a flood of decoy lookups must not
  push a real connect out of a capped log). A destination is (kind, host — or the address when
  there is no host name —, port); its first attempt is logged with all its fields, later ones
  only counted: an ``egress`` message carries ``count``, the attempts it stands for since the
  last message of that destination (the host adds them up). Each process keeps at most
  `MAX_DESTINATIONS` distinct destinations; attempts at further ones are counted and reported
  as ``{"type": "egress", "dropped": n, "cap": MAX_DESTINATIONS}``, which makes the log's
  coverage ``partial``. The host applies the same cap to the union of all processes.

The model gateway (`runner.runtime.steps.gateway`) is not egress: it is the runtime itself, on the
sandbox's own loopback. Attempts at its address (``127.0.0.1`` or ``localhost`` and its port;
`set_gateway`, ``SANDBOX_REPLAY_GATEWAY`` in children) are not reported; any other address,
the loopback's other ports included, is.

Sinks: in the runtime's own process records are queued in memory (`drain`) and sent over the
channel; in any other process (Python children, and forks of the runtime) each record is
appended as one JSON line with one ``os.write`` to the file named by `ENV_LOG` (``O_APPEND``),
which the runtime forwards with `ChildLog`: a new destination at once, the repeat counts when
the next new destination is written, every `CHILD_FLUSH_REPEATS` repeats and at exit. Tool code
can write to that file too: it is evidence, not a guarantee (the sandbox is the guarantee).
"""

import atexit
import contextlib
import os
import sys
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

from runner.runtime.egress import events, programs
from runner.wire.destinations import MAX_DESTINATIONS
from runner.wire.env import ENV_GATEWAY

ENV_LOG = "SANDBOX_REPLAY_EGRESS_LOG"
ENV_CLOCK = "SANDBOX_REPLAY_CLOCK"  # runner.sdk.wallclock.ENV_CLOCK (not imported: children
# import this module at start-up and most never need the clock's machinery)
ENV_WITNESSED = "SANDBOX_REPLAY_WITNESSED"  # set by a worker whose tree the witness serves
# Under the witness (`set_witnessed`) the hook leaves to it what it sees itself: connects and
# addressed sends (an attempt is counted once, by the witness); every note then is a clock-only
# note (``partial: false``; children's and foreign code's network calls are witnessed).
_WITNESS_EVENTS = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost"})
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
_HERE = os.path.abspath(__file__)  # runner/runtime/egress/audit.py
RUNTIME_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))

MAX_COVERAGE_KEYS = 1000  # distinct coverage reasons remembered (each is reported once)
CHILD_FLUSH_REPEATS = 1024  # a child writes its repeat counts at least this often

_state: Dict[str, Any] = dict(installed=False, owner_pid=None, log_path=None, gateway=None)
_state["witnessed"] = False
# Modules a handler needs (json, ipaddress, shlex, urllib.parse) are imported when it first runs:
# every Python child imports this module at start-up, most never open a socket.
_queue: List[Dict[str, Any]] = []
_seen_coverage: Set[Tuple[Any, ...]] = set()
_local = threading.local()
# Destination -> attempts seen; destination -> [attempt, count] not yet reported; and the
# attempts at destinations past the cap not yet reported. Guarded by _lock (hooks run in any
# thread); a forked child starts afresh (_after_fork).
_destinations: Dict[Tuple[Any, ...], int] = {}
_pending: Dict[Tuple[Any, ...], List[Any]] = {}
_dropped: List[int] = [0]
_lock = threading.Lock()


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # it may have been held by another thread at fork time
    del _queue[:]  # the owner's (the runtime's, which the worker is a fork of): it drains it
    _destinations.clear()
    _pending.clear()
    _dropped[0] = 0


os.register_at_fork(after_in_child=_after_fork)


# --- installation ----------------------------------------------------------------------------


def install(log_path: Optional[str], in_memory: bool) -> None:
    """Install the hook once per process (later calls only update the sinks).

    Args:
        log_path: the child log file records go to from other processes (and from this one
            when ``in_memory`` is False).
        in_memory: True in the runtime's own process: queue records for `drain`.
    """
    _state["log_path"] = log_path
    _state["owner_pid"] = os.getpid() if in_memory else None
    if not _state["installed"]:
        _state["installed"] = True
        sys.addaudithook(_hook)


def install_from_env() -> bool:
    """Install the hook in a Python child when the runtime's log variable is set.

    Returns:
        True when installed; False outside a sandbox-replay run (nothing is done).
    """
    path = os.environ.get(ENV_LOG)
    if not path:
        return False
    gateway_from_env()
    _state["witnessed"] = os.environ.get(ENV_WITNESSED) == "1"
    install(path, in_memory=False)
    atexit.register(flush_child)
    return True


def set_witnessed(on: bool) -> None:
    """Whether this process and its children are under the egress witness (the worker's call).

    The runtime starts the worker with `ENV_WITNESSED` set (its sitecustomize reads it) and the
    worker clears it when the bootstrap failed (the runtime then says why coverage is partial).
    """
    _state["witnessed"] = on
    if on:
        os.environ[ENV_WITNESSED] = "1"
    else:
        os.environ.pop(ENV_WITNESSED, None)


def gateway_from_env() -> None:
    """`set_gateway` from ``SANDBOX_REPLAY_GATEWAY`` (``host:port``), when it is set."""
    host, _, port = os.environ.get(ENV_GATEWAY, "").rpartition(":")
    if host and port.isdigit():
        set_gateway(host, int(port))


def set_gateway(host: str, port: int) -> None:
    """Leave the model gateway at ``host``:``port`` out of the log (it is not egress)."""
    _state["gateway"] = (host, int(port))


def _is_gateway(host: Optional[str], address: Optional[str], port: Any) -> bool:
    gateway = _state["gateway"]
    if gateway is None or port != gateway[1]:
        return False
    names = {n for n in (host, address) if n}
    return bool(names) and names <= (_LOOPBACK_NAMES | {gateway[0]})


def child_environment(log_path: str) -> Dict[str, str]:
    """Environment variables the runtime sets so that Python children load the hook.

    Returns:
        ``{ENV_LOG: log_path, "PYTHONPATH": SITE_DIR:RUNTIME_ROOT[:previous]}``.
    """
    parts = [SITE_DIR, RUNTIME_ROOT]
    previous = os.environ.get("PYTHONPATH", "")
    parts += [p for p in previous.split(os.pathsep) if p and p not in parts]
    return {ENV_LOG: log_path, "PYTHONPATH": os.pathsep.join(parts)}


def drain() -> List[Dict[str, Any]]:
    """Messages (``egress``/``coverage`` dicts with a ``type``) queued in this process.

    The queued ones first, then one ``egress`` per destination with attempts not yet reported
    (``count``), then the attempts dropped past the cap, if any.
    """
    out: List[Dict[str, Any]] = []
    while True:
        try:
            out.append(_queue.pop(0))
        except IndexError:
            break
    out.extend(_take_pending())
    return out


def _take_pending() -> List[Dict[str, Any]]:
    with _lock:
        pending = list(_pending.values())
        _pending.clear()
        dropped, _dropped[0] = _dropped[0], 0
    out = [{"type": "egress", "attempt": attempt, "count": count} for attempt, count in pending]
    if dropped:
        out.append({"type": "egress", "dropped": dropped, "cap": MAX_DESTINATIONS})
    return out


# --- the hook --------------------------------------------------------------------------------


def _hook(event: str, args: Tuple[Any, ...]) -> None:
    handler = _HANDLERS.get(event)
    if handler is None:
        return
    try:
        if getattr(_local, "busy", False):
            return
        _local.busy = True
    except Exception:  # interpreter shutdown: thread locals may be gone
        return
    try:
        handler(event, args)
    except Exception:  # noqa: S110 - a hook must never fail the audited operation
        pass
    finally:
        _local.busy = False


def _emit(message: Dict[str, Any]) -> None:
    if _state["owner_pid"] == os.getpid():
        _queue.append(message)
        return
    _write_lines([message])


def _write_lines(messages: List[Dict[str, Any]]) -> None:
    """Append ``messages`` to the child log, one JSON line each, in one ``os.write``."""
    path = _state["log_path"]
    if not path or not messages:
        return
    import json

    data = "".join(
        json.dumps(m, ensure_ascii=True, separators=(",", ":")) + "\n" for m in messages
    ).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def flush_child() -> None:
    """Write this child's unreported repeat counts and drops (at exit; the worker: per request)."""
    try:
        if _state["owner_pid"] != os.getpid():
            _write_lines(_take_pending())
    except Exception:  # noqa: S110 - at exit or inside a hook: never raise
        pass


def _log_attempt(attempt: Dict[str, Any]) -> None:
    """Count ``attempt`` against its destination; a new destination is reported in full."""
    key = events.destination_key(attempt)
    child = _state["owner_pid"] != os.getpid()
    with _lock:
        seen = _destinations.get(key)
        if seen is None and len(_destinations) >= MAX_DESTINATIONS:
            _dropped[0] += 1
            flush = child and _dropped[0] >= CHILD_FLUSH_REPEATS
        elif seen is None:
            _destinations[key] = 1
            flush = child  # a child writes a new destination at once (with pending counts)
            _pending[key] = [attempt, 1]
        else:
            _destinations[key] = seen + 1
            entry = _pending.get(key)
            if entry is None:
                short = {k: attempt.get(k) for k in ("kind", "host", "address", "port", "pid")}
                _pending[key] = [short, 1]
            else:
                entry[1] += 1
            flush = child and (seen + 1) % CHILD_FLUSH_REPEATS == 0
    if flush:
        _write_lines(_take_pending())


UNREAD = (
    "the egress witness could not read where a call went (its process made itself not "
    "dumpable): attempts logged without their destination"
)


def record_witnessed(attempt: Dict[str, Any]) -> None:
    """Log an attempt the egress witness saw (any thread): the hook's destinations, counts, cap.

    An attempt logged without its destination (the witness could not read the caller's memory:
    it made itself not dumpable) makes the log's coverage ``partial`` (once, `UNREAD`): the
    attempt is counted and denied, but the log no longer names every destination tried.
    """
    _log_attempt(attempt)
    if (
        attempt.get("address") is None
        and attempt.get("host") is None
        and attempt.get("kind") in ("connect", "sendto", "sendmsg")
    ):
        _coverage(("witness", "unread"), reason=UNREAD, pid=attempt.get("pid"))


def _attempt(
    event: str,
    kind: str,
    host: Optional[str],
    address: Optional[str],
    port: Any,
    resolved_from: Optional[str] = None,
    **extra: Any,
) -> None:
    if _is_gateway(host, address, port):
        return
    attempt = {
        "kind": kind,
        "host": host,
        "address": address,
        "port": port,
        "resolved_from": resolved_from,
        "outcome": "attempted",
        "pid": os.getpid(),
        "event": event,
    }
    attempt.update({k: v for k, v in extra.items() if v is not None})
    _log_attempt(attempt)


def _on_network(event: str, args: Tuple[Any, ...]) -> None:
    witnessed = _state["witnessed"] and event in _WITNESS_EVENTS and args
    if witnessed and int(getattr(args[0], "family", 0)) in (2, 10):  # AF_INET(6): the witness's
        return
    if event in events.LOOKUP_EVENTS:
        host, port = events.lookup(event, args)
        _local.last_lookup = (host, port)
        _attempt(event, "dns", host, host if events.is_ip(host) else None, port)
        return
    found = events.destination(event, args, getattr(_local, "last_lookup", None))
    if found is not None:
        kind, host, address, port, resolved_from, extra = found
        _attempt(event, kind, host, address, port, resolved_from, **extra)


# --- child processes and ctypes ----------------------------------------------------------------


def _coverage(key: Tuple[Any, ...], **fields: Any) -> None:
    """Report a finding once; under the witness one with ``clock: "machine"`` is clock-only."""
    if key in _seen_coverage:
        return
    if len(_seen_coverage) >= MAX_COVERAGE_KEYS:  # coverage is partial already; stay bounded
        return
    _seen_coverage.add(key)
    clock_only = _state["witnessed"] and fields.get("clock") == programs.MACHINE_CLOCK
    message = {"type": "coverage", "partial": not clock_only, "pid": os.getpid()}
    message.update({k: events.text(v) for k, v in fields.items() if v is not None})
    _emit(message)


@contextlib.contextmanager
def unnoted() -> Iterator[None]:
    """Within this block the hook notes nothing in this thread (the witness's own calls)."""
    busy = getattr(_local, "busy", False)
    _local.busy = True
    try:
        yield
    finally:
        _local.busy = busy


def coverage_note(key: Tuple[Any, ...], reason: str) -> None:
    """Note ``reason`` once per process (the clock's: ``clock: "machine"``; `_coverage`)."""
    _coverage(key, reason=reason, clock=programs.MACHINE_CLOCK)


def _env_clock() -> Optional[str]:
    """The clock variable's name when this process exports the run's clock to children."""
    return ENV_CLOCK if os.environ.get(ENV_CLOCK) else None


def _note(found: Optional[programs.Finding]) -> None:
    if found is not None:
        _coverage(found[0], **found[1])


def _classify_child(event: str, program: Optional[str], argv: List[str], env: Any) -> None:
    _note(programs.classify(program, argv, env, ENV_LOG, SITE_DIR, _env_clock()))


def _classify_command(event: str, command: str, env: Any) -> None:
    _note(programs.classify_command(command, env, ENV_LOG, SITE_DIR, _env_clock()))


def _on_popen(event: str, args: Tuple[Any, ...]) -> None:
    executable = events.text(os.fspath(args[0])) if args and args[0] is not None else None
    argv = events.argv_of(args[1] if len(args) > 1 else None)
    env = args[3] if len(args) > 3 else None
    _classify_child(event, executable, argv, env)


def _on_system(event: str, args: Tuple[Any, ...]) -> None:
    _classify_command(event, events.text(args[0]) or "", None)


def _on_exec(event: str, args: Tuple[Any, ...]) -> None:
    # os.exec: (path, args, env); os.posix_spawn: (path, argv, env);
    # os.spawn: (mode, path, args, env)
    offset = 1 if event == "os.spawn" else 0
    path = events.text(os.fspath(args[offset])) if len(args) > offset else None
    argv = events.argv_of(args[offset + 1] if len(args) > offset + 1 else None)
    env = args[offset + 2] if len(args) > offset + 2 else None
    _classify_child(event, path, argv, env)


def _on_ctypes(event: str, args: Tuple[Any, ...]) -> None:
    found = events.foreign_code(event, args)
    _note(None if found is None else (found[0], dict(found[1], clock=programs.MACHINE_CLOCK)))


_HANDLERS: Dict[str, Callable[[str, Tuple[Any, ...]], None]] = {
    "socket.getaddrinfo": _on_network,
    "socket.gethostbyname": _on_network,
    "socket.gethostbyname_ex": _on_network,
    "socket.gethostbyaddr": _on_network,
    "socket.connect": _on_network,
    "socket.sendto": _on_network,
    "socket.sendmsg": _on_network,
    "http.client.connect": _on_network,
    "urllib.Request": _on_network,
    "subprocess.Popen": _on_popen,
    "os.system": _on_system,
    "os.exec": _on_exec,
    "os.posix_spawn": _on_exec,
    "os.spawn": _on_exec,
    "ctypes.dlopen": _on_ctypes,
    "ctypes.dlsym": _on_ctypes,
}
