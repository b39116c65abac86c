"""What a replay's user code read that its trace does not pin: the nondeterminism report.

Standard library only, Python 3.9+. Installed in the worker (`runner.runtime.worker.process`)
in mode ``reproduce``, after the run's environment is set and before any tool module is
imported (`install`). From then on it counts, per ``(kind, what)``, reads made by the user's
code (tool modules, agent programs and the libraries they import):

- ``wall_clock``: a direct read of the machine's wall clock (``time.time``, ``time.time_ns``,
  ``clock_gettime(CLOCK_REALTIME)``, ``datetime.now``/``utcnow``/``today``, ``date.today``,
  ``time.localtime()`` and the other default-argument readers; `runner.sdk.wallclock` tells).
  The replay serves each such read the run's clock reading (frozen per call), but the trace
  holds one reading per *call*, not the value this read returned when the run was recorded:
  it is pinned only when the recorder froze the process's clock the same way. Reads through
  ``runner.sdk.now()`` are the run's clock and are not listed; neither are a log record's
  timestamps (``logging``'s own read).
- ``randomness``: the ``random`` module's functions while its generator was never seeded with
  a value (``random.seed(x)``, x not None, stops the listing), ``random.seed()`` without a value,
  ``random.Random()`` without a seed, ``os.urandom``/``os.getrandom`` (so ``secrets``,
  ``uuid.uuid4``, ``random.SystemRandom``), and reads of ``/dev/urandom``/``/dev/random``.
- ``environment_variable``: an ``os.environ`` (``os.getenv``, ``in``) read of a variable that is
  not the runtime's own (``SANDBOX_REPLAY_*`` and the variables the runtime set for the run,
  e.g. the model gateway's); ``present`` says whether the sandbox had it.
- ``file_read``: a file opened for reading (the ``open`` audit event) outside the tool snapshot,
  the runtime, the Python installation (its standard library and site-packages, pinned by the
  environment manifest's versions), the temporary folder and the files the run wrote itself.

Who read: from the reading frame up, standard-library frames are passed; the first other frame
decides. Under ``runner`` (the runtime, the SDK) the read is the runtime's own and not listed;
in a ``site-packages``/``dist-packages`` folder it is an installed package's (``by:
package``: an SDK reading its own configuration); anything else is the run's own code (``by:
code``: the tool snapshot's modules, the agent), except an environment variable read by the
standard library's own lookup on the code's behalf (``by: stdlib``: ``urllib``'s proxy lookup
iterates every variable, ``tempfile`` reads ``TMPDIR``; the environment's accessors,
``os.environ[...]``, ``.get``, ``os.getenv``, ``in``, are the code's own reads). Each is
named by ``site`` (file:line) and ``via`` (the standard-library function called, e.g.
``uuid.uuid4``), so that ``uuid.uuid4()`` in a tool counts and ``tempfile`` used by the
runtime does not. A standard-library module's
own import-time reads (``logging`` reads the clock when imported) are not listed.

What it cannot see (docs/reproduce.md): C code (extension modules, numpy's generator,
``clock_gettime`` from C), processes started by the tool (only their outbound attempts are
logged, by the egress hook), ``PYTHONHASHSEED`` (string hashing and set order), the monotonic
clocks (``time.monotonic``, ``perf_counter``: durations and every library's timeouts; they
stay real), and reads by code that removes these hooks. It is a diagnostic of honest code, not
a boundary: the worker runs the user's code and reports what it saw.

Entries are bounded (`MAX_ENTRIES` distinct ``(kind, what)``, strings cut at `MAX_TEXT`);
past that only ``dropped`` counts. `drain` hands the new counts to the worker's next answer.
"""

import os
import random
import sys
import sysconfig
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from runner.sdk import wallclock
from runner.wire.observed import KINDS, MAX_ENTRIES, MAX_TEXT

__all__ = ["KINDS", "MAX_ENTRIES", "drain", "install", "installed"]

OWN_PREFIX = "SANDBOX_REPLAY_"
RANDOM_DEVICES = ("/dev/urandom", "/dev/random")
# the random module's functions that draw from its hidden generator (3.9's list)
RANDOM_FUNCTIONS = (
    "random",
    "uniform",
    "triangular",
    "randint",
    "choice",
    "randrange",
    "sample",
    "shuffle",
    "choices",
    "normalvariate",
    "lognormvariate",
    "expovariate",
    "vonmisesvariate",
    "gammavariate",
    "gauss",
    "betavariate",
    "paretovariate",
    "weibullvariate",
    "getrandbits",
    "randbytes",
)

_lock = threading.Lock()
_state: Dict[str, Any] = {"installed": False, "seeded": False, "dropped": 0}
_entries: Dict[Tuple[str, str], Dict[str, Any]] = {}
_fast: Dict[Tuple[str, str, Any], Dict[str, Any]] = {}  # (kind, what, caller's code) -> entry
_sent: Dict[Tuple[str, str], int] = {}
_written: Set[str] = set()
_own_env: Set[str] = set()
_allowed: List[str] = []
# code file name -> "stdlib" | "runner" | "hook" | "package" | "code"
_kinds: Dict[str, str] = {}

_PACKAGES = os.sep + "site-packages" + os.sep
_DIST_PACKAGES = os.sep + "dist-packages" + os.sep
_HOOK_FILES = {os.path.abspath(__file__), os.path.abspath(wallclock.__file__)}
_RUNNER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _stdlib_dirs() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if k in paths}
    return tuple(sorted(found))


_STDLIB = _stdlib_dirs()


def _kind_of(filename: str) -> str:
    kind = _kinds.get(filename)
    if kind is not None:
        return kind
    path = filename if filename.startswith("<") else os.path.abspath(filename)
    if path in _HOOK_FILES:
        kind = "hook"
    elif path.startswith(_RUNNER_DIR):
        kind = "runner"
    elif _PACKAGES in path or _DIST_PACKAGES in path:
        kind = "package"
    elif path.startswith("<frozen") or path.startswith(_STDLIB):
        kind = "stdlib"
    else:
        kind = "code"
    _kinds[filename] = kind
    return kind


_IMPORTING = ("_frozen_importlib", "importlib._bootstrap")
# the environment's own accessors: a read through anything else of the standard library is
# that library's own lookup (urllib's proxies iterate every variable)
_ENV_ACCESSORS = frozenset({"os", "collections.abc", "_collections_abc"})


def _origin(frame: Any) -> Optional[Tuple[str, Optional[str], str, bool]]:
    """``(site, via, by, direct)`` of the code behind a read, or None: the runtime's own.

    ``by``: ``code`` (the run's own code: the tool snapshot's modules, the agent) or
    ``package`` (an installed package: its own configuration, on the code's behalf).
    ``direct``: every standard-library frame passed is of `_ENV_ACCESSORS`.
    """
    via: Optional[str] = None
    direct = True
    while frame is not None:
        code = frame.f_code
        kind = _kind_of(code.co_filename)
        if kind in ("code", "package"):
            site = "{}:{}".format(code.co_filename, frame.f_lineno)[-MAX_TEXT:]
            return site, via, kind, direct
        if kind == "runner":
            return None
        if kind == "stdlib":
            module = frame.f_globals.get("__name__", "?")
            direct = direct and module in _ENV_ACCESSORS
            via = "{}.{}".format(module, code.co_name)
            if via.startswith(_IMPORTING):  # a standard-library module's own import-time read
                return None
        frame = frame.f_back
    return None  # the interpreter's own (no Python frame of anyone's code)


def _env_via(via: str) -> str:
    """The call the code wrote for a read through ``os.environ``'s Mapping methods.

    ``os.environ.get(...)`` runs ``collections.abc.Mapping.get`` (the frame the walk meets),
    which read to a user as "via collections.abc.get": it is said ``os.environ.get``, and a
    ``NAME in os.environ`` test ``in os.environ``.
    """
    module, _, name = via.rpartition(".")
    if module not in ("collections.abc", "_collections_abc"):
        return via
    return "in os.environ" if name == "__contains__" else "os.environ." + name


def _note(kind: str, what: str, frame: Any, **extra: Any) -> None:
    """Count one read of ``what`` when the user's code made it (see the module)."""
    while frame is not None and _kind_of(frame.f_code.co_filename) == "hook":
        frame = frame.f_back
    if frame is None:
        return
    # the hot path (a loop drawing random numbers): a read whose caller is code or a package
    # is decided by that caller alone, so its entry is found by (kind, what, caller's code)
    fast = (kind, what, frame.f_code)
    entry = _fast.get(fast)
    if entry is not None:
        entry["count"] += 1  # under the GIL; concurrent threads may undercount (said in docs)
        return
    found = _origin(frame)
    if found is None:
        return
    site, via, by, direct = found
    if kind == "environment_variable" and via is not None:
        via = _env_via(via)
    if kind == "wall_clock" and via is not None and via.startswith("logging."):
        return  # a log record's timestamp, not the code's behaviour
    if kind == "environment_variable" and by == "code" and not direct:
        by = "stdlib"  # the standard library's own lookup (proxies, TMPDIR) on the code's behalf
    key = (kind, what[:MAX_TEXT])
    with _lock:
        entry = _entries.get(key)
        if entry is None:
            if len(_entries) >= MAX_ENTRIES:
                _state["dropped"] += 1
                return
            entry = {"kind": kind, "what": key[1], "count": 0, "site": site, "by": by}
            if via is not None:
                entry["via"] = via[:MAX_TEXT]
            entry.update(extra)
            _entries[key] = entry
        entry["count"] += 1
        if _kind_of(frame.f_code.co_filename) in ("code", "package") and len(_fast) < 4096:
            _fast[fast] = entry


def drain() -> Dict[str, Any]:
    """What changed since the last drain: ``{"entries": [...], "dropped": n}`` or ``{}``.

    Each entry is whole (``count`` is the total so far); the runtime keeps the latest.
    """
    with _lock:
        changed = [dict(e) for k, e in _entries.items() if _sent.get(k) != e["count"]]
        for entry in changed:
            _sent[(entry["kind"], entry["what"])] = entry["count"]
        dropped = _state["dropped"]
        if not changed and dropped == _state.get("dropped_sent", 0):
            return {}
        _state["dropped_sent"] = dropped
    return {"entries": changed, "dropped": dropped}


def installed() -> bool:
    """True once `install` ran in this process."""
    return bool(_state["installed"])


# --- the wall clock ---------------------------------------------------------------------------


def _on_clock(name: str) -> None:
    _note("wall_clock", name, sys._getframe(2))


# --- randomness -------------------------------------------------------------------------------


def _wrap_random(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def drawn(*args: Any, **kwargs: Any) -> Any:
        if not _state["seeded"]:
            _note("randomness", "random." + name, sys._getframe(1))
        return func(*args, **kwargs)

    drawn.__name__ = drawn.__qualname__ = name
    drawn.__doc__ = getattr(func, "__doc__", None)
    return drawn


def _install_random() -> None:
    module_seed = random.seed

    def seed(a: Any = None, *args: Any, **kwargs: Any) -> None:
        _state["seeded"] = a is not None
        if a is None:
            _note("randomness", "random.seed() without a value", sys._getframe(1))
        module_seed(a, *args, **kwargs)

    random.seed = seed
    for name in RANDOM_FUNCTIONS:
        func = getattr(random, name, None)
        if func is not None:
            setattr(random, name, _wrap_random(name, func))
    class_seed = random.Random.seed

    def instance_seed(self: Any, a: Any = None, *args: Any, **kwargs: Any) -> None:
        if a is None and self is not getattr(random, "_inst", None):
            _note("randomness", "random.Random() without a seed", sys._getframe(1))
        class_seed(self, a, *args, **kwargs)

    random.Random.seed = instance_seed  # type: ignore[method-assign]
    for owner, name in ((os, "urandom"), (os, "getrandom"), (random, "_urandom")):
        func = getattr(owner, name, None)
        if func is not None:
            setattr(owner, name, _wrap_bytes("os." + name.lstrip("_"), func))


def _wrap_bytes(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def drawn(*args: Any, **kwargs: Any) -> Any:
        _note("randomness", name, sys._getframe(1))
        return func(*args, **kwargs)

    drawn.__name__ = drawn.__qualname__ = getattr(func, "__name__", name)
    return drawn


# --- environment variables --------------------------------------------------------------------


def _install_environ() -> None:
    environ_class = type(os.environ)
    getitem = environ_class.__getitem__

    def __getitem__(self: Any, key: Any) -> Any:
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        if name.startswith(OWN_PREFIX) or name in _own_env:
            return getitem(self, key)
        try:
            value = getitem(self, key)
        except KeyError:
            _note("environment_variable", name, sys._getframe(1), present=False)
            raise
        _note("environment_variable", name, sys._getframe(1), present=True)
        return value

    environ_class.__getitem__ = __getitem__  # type: ignore[method-assign]


# --- files ------------------------------------------------------------------------------------


def _path_of(target: Any) -> Optional[str]:
    if isinstance(target, int):
        return None  # an fd already open (os.fdopen): its open was seen, or is not a file
    try:
        path = os.fsdecode(target)
    except TypeError:
        return None
    return os.path.abspath(path)


def _reads(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    if isinstance(flags, int):
        return flags & os.O_ACCMODE != os.O_WRONLY
    return True


def _audit(event: str, args: Tuple[Any, ...]) -> None:
    if event != "open" or not _state["installed"]:
        return
    try:
        path = _path_of(args[0])
        if path is None:
            return
        mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, None)
        if not _reads(mode, flags):
            _written.add(path)
            return
        if path in RANDOM_DEVICES:
            _note("randomness", path, sys._getframe(1))
            return
        if path in _written or path == os.devnull or path.startswith(tuple(_allowed)):
            return
        _note("file_read", path, sys._getframe(1))
    except Exception:  # noqa: S110 - an audit hook never breaks the call it watches
        pass


def _allowed_roots(roots: Iterable[str]) -> List[str]:
    import site
    import tempfile

    found = [os.path.abspath(r) for r in roots if r]
    found.append(_RUNNER_DIR.rstrip(os.sep))
    for attr in ("prefix", "base_prefix", "exec_prefix", "base_exec_prefix"):
        value = getattr(sys, attr, None)
        if value:
            found.append(os.path.abspath(value))
    try:
        found.extend(site.getsitepackages())
        found.append(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site module
        pass
    found.append(tempfile.gettempdir())
    return sorted({p.rstrip(os.sep) + os.sep for p in found if p and p != os.sep})


def install(roots: Iterable[str] = (), own_env: Iterable[str] = ()) -> None:
    """Start counting the user's code's reads in this process (once; idempotent).

    Args:
        roots: folders whose files are pinned (the tool snapshot's folders).
        own_env: variable names the runtime set for the run (not the user's reads).
    """
    if _state["installed"]:
        return
    _allowed.extend(_allowed_roots(roots))  # before the environ hook: tempfile reads TMPDIR
    _own_env.update(str(n) for n in own_env)
    _install_random()
    _install_environ()
    wallclock.set_observer(_on_clock)
    sys.addaudithook(_audit)
    _state["installed"] = True
