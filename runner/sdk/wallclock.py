"""The run's wall clock: every wall-clock read of a Python process returns the run's reading.

Standard library only, Python 3.9+. SPEC.md ("The run's clock"): code that reads the clock sees
the run's time, not only through `runner.sdk.now`. The trace keeps one clock reading per call,
so the rule is *frozen per call*: every wall-clock read made while call *k* runs returns call
*k*'s reading (an extra ``logging`` call or a second ``time.time()`` cannot shift a later
reading). Between calls the reading of the last call holds; before the first call, the run's
clock start.

`install` replaces, once per process:

- ``time.time``, ``time.time_ns`` and ``time.clock_gettime``/``clock_gettime_ns`` of
  ``CLOCK_REALTIME`` by functions returning the reading;
- the *default argument* of ``time.localtime``, ``time.gmtime``, ``time.ctime``,
  ``time.asctime`` and ``time.strftime`` (an explicit time is converted as before);
- the classmethods ``datetime.datetime.now``/``utcnow``/``today`` and ``datetime.date.today``
  *on the classes themselves*. ``datetime.datetime`` is a C type whose attributes cannot be
  assigned, and a replacement class (freezegun's way) breaks code that keys tables by the
  class (PyYAML's representers, ``sqlite3`` adapters, C serialisers checking the exact type):
  so the type's attribute dict is written directly and the type marked modified
  (`_set_class_attribute`). The classes stay the same objects; every reference to them sees
  the run's clock, ``from datetime import datetime`` taken before `install` included, as do
  ``x.now()`` on a value and subclasses that do not override the methods. Where the
  interpreter does not allow it (no ctypes, not CPython) `install` says so and the runtime
  reports a coverage note: ``date.today()`` and ``datetime.today()`` still read ``time.time``
  and follow the run's clock there, ``now()`` does not.

Not replaced, on purpose: ``time.monotonic``, ``time.perf_counter``, ``time.process_time``,
``time.sleep`` and every timeout: they stay real, so deadlines and waits work. A busy-wait on
``time.time()`` therefore never sees time pass and ends only at the run's deadline.

What it cannot reach (docs/threat-model.md): C code that asks the operating system itself
(``clock_gettime`` from an extension module, a ctypes call) and processes that are not Python
or do not load ``sitecustomize``; the audit hook reports such children and ctypes loads as
``coverage`` notes with ``clock: machine``.

Sources of the reading: `set_reading` (the process-wide reading: the in-sandbox runtime moves
it at every call, and exports it in `ENV_CLOCK` so that a Python child started during call *k*
starts frozen at call *k*'s reading, `install_from_env`), and `frozen` (a reading for one
context only: ``runner.sdk.record`` in a user's own process freezes each recorded tool call
without touching other threads). With neither, the replaced functions return the real time.
"""

import contextlib
import contextvars
import datetime as _dt
import functools
import math
import os
import sys
import time as _time
from typing import Any, Callable, Dict, Iterator, Optional

ENV_CLOCK = "SANDBOX_REPLAY_CLOCK"

real_time: Callable[[], float] = _time.time
"""The machine's clock (``time.time`` as it was before `install`)."""

_REAL_TIME_NS = _time.time_ns
_REAL_LOCALTIME = _time.localtime
_REAL_GMTIME = _time.gmtime
_REAL_CTIME = _time.ctime
_REAL_ASCTIME = _time.asctime
_REAL_STRFTIME = _time.strftime
_REAL_CLOCK_GETTIME = getattr(_time, "clock_gettime", None)
_REAL_CLOCK_GETTIME_NS = getattr(_time, "clock_gettime_ns", None)
_REALTIME_ID = getattr(_time, "CLOCK_REALTIME", None)
_RealDate = _dt.date
_RealDatetime = _dt.datetime

_state: Dict[str, Any] = {"installed": False, "reading": None}
_context: "contextvars.ContextVar[Optional[float]]" = contextvars.ContextVar(
    "sandbox_replay_clock", default=None
)


def reading() -> Optional[float]:
    """The frozen reading in force here (this context's, else the process's), or None."""
    value = _context.get()
    return value if value is not None else _state["reading"]


def datetime_problem() -> Optional[str]:
    """Why ``datetime``'s classmethods could not be patched by `install`, or None."""
    problem = _state.get("datetime_problem")
    return problem if isinstance(problem, str) else None


def installed() -> bool:
    """True once `install` replaced the clock functions of this process."""
    return bool(_state["installed"])


def set_reading(value: float, export: bool = True) -> None:
    """Freeze every wall-clock read of this process at ``value`` (epoch seconds).

    Args:
        value: the reading.
        export: also put it in ``os.environ[ENV_CLOCK]``, so that children started from now
            on start at this reading.
    """
    _state["reading"] = float(value)
    if export:
        os.environ[ENV_CLOCK] = repr(float(value))


@contextlib.contextmanager
def frozen(value: float) -> Iterator[None]:
    """Freeze wall-clock reads in this context (not other threads) while the block runs."""
    token = _context.set(float(value))
    try:
        yield
    finally:
        _context.reset(token)


def now() -> float:
    """The reading in force, or the machine's time when there is none (epoch seconds)."""
    value = reading()
    return real_time() if value is None else value


def set_observer(observer: Optional[Callable[[str], None]]) -> None:
    """Call ``observer(name)`` at every read through a replaced function (None: stop).

    ``name`` is the function read (``time.time``, ``datetime.now``, ...); `now` itself is not
    observed (``runner.sdk.now()`` is the run's clock). The replay's nondeterminism report
    (`runner.runtime.nondeterminism`) uses it.
    """
    _state["observer"] = observer


def _observed(name: str) -> None:
    observer = _state.get("observer")
    if observer is not None:
        observer(name)


def _ns(value: float) -> int:
    return round(value * 1_000_000) * 1000


class _Function:
    """A replaced ``time`` function that, like the builtin it replaces, never binds as a method.

    Classes keep stdlib functions as attributes (``logging.Formatter.converter =
    time.localtime``): a plain Python function there would receive ``self`` as its argument.
    """

    def __init__(self, func: Callable[..., Any], real: Any) -> None:
        self._func = func
        self.__name__ = getattr(real, "__name__", func.__name__)
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(real, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    def __repr__(self) -> str:
        return "<sandbox-replay clock function {}>".format(self.__name__)


def _wraps(real: Any) -> Callable[[Callable[..., Any]], Any]:
    return functools.partial(_Function, real=real)


@_wraps(_time.time)
def _patched_time() -> float:
    _observed("time.time")
    return now()


@_wraps(_time.time_ns)
def _patched_time_ns() -> int:
    _observed("time.time_ns")
    value = reading()
    return _REAL_TIME_NS() if value is None else _ns(value)


@_wraps(_time.localtime)
def _patched_localtime(secs: Optional[float] = None) -> Any:
    if secs is None:
        _observed("time.localtime")
    return _REAL_LOCALTIME(now() if secs is None else secs)


@_wraps(_time.gmtime)
def _patched_gmtime(secs: Optional[float] = None) -> Any:
    if secs is None:
        _observed("time.gmtime")
    return _REAL_GMTIME(now() if secs is None else secs)


@_wraps(_time.ctime)
def _patched_ctime(secs: Optional[float] = None) -> str:
    if secs is None:
        _observed("time.ctime")
    return _REAL_CTIME(now() if secs is None else secs)


@_wraps(_time.asctime)
def _patched_asctime(t: Any = None) -> str:
    if t is None:
        _observed("time.asctime")
    return _REAL_ASCTIME(_REAL_LOCALTIME(now()) if t is None else t)


@_wraps(_time.strftime)
def _patched_strftime(format: str, t: Any = None) -> str:
    if t is None:
        _observed("time.strftime")
    return _REAL_STRFTIME(format, _REAL_LOCALTIME(now()) if t is None else t)


@_wraps(_REAL_CLOCK_GETTIME)
def _patched_clock_gettime(clk_id: int) -> float:
    if clk_id == _REALTIME_ID:
        _observed("time.clock_gettime")
        return now()
    assert _REAL_CLOCK_GETTIME is not None
    return _REAL_CLOCK_GETTIME(clk_id)  # type: ignore[no-any-return]


@_wraps(_REAL_CLOCK_GETTIME_NS)
def _patched_clock_gettime_ns(clk_id: int) -> int:
    if clk_id == _REALTIME_ID:
        _observed("time.clock_gettime_ns")
        value = reading()
        if value is not None:
            return _ns(value)
    assert _REAL_CLOCK_GETTIME_NS is not None
    return _REAL_CLOCK_GETTIME_NS(clk_id)  # type: ignore[no-any-return]


# The original classmethods, called when no reading is in force.
_ORIGINAL_NOW = _RealDatetime.__dict__["now"]
_ORIGINAL_UTCNOW = _RealDatetime.__dict__["utcnow"]


def _now(cls: Any, tz: Any = None) -> Any:
    """``datetime.now(tz)`` at the run's reading."""
    _observed("datetime.now")
    value = reading()
    if value is None:
        return _ORIGINAL_NOW.__get__(None, cls)(tz)
    return cls.fromtimestamp(value, tz)


def _utcnow(cls: Any) -> Any:
    """``datetime.utcnow()`` at the run's reading (naive UTC)."""
    _observed("datetime.utcnow")
    value = reading()
    if value is None:
        return _ORIGINAL_UTCNOW.__get__(None, cls)()
    return cls.fromtimestamp(value, _dt.timezone.utc).replace(tzinfo=None)


def _today(cls: Any) -> Any:
    """``date.today()`` / ``datetime.today()`` at the run's reading (local time)."""
    _observed("{}.today".format(cls.__name__))
    return cls.fromtimestamp(now())


def _set_class_attribute(cls: type, name: str, value: Any) -> None:
    """Set ``cls.name`` even on a C type, whose attributes cannot be assigned.

    A pure-Python ``datetime`` (no ``_datetime``) takes ``setattr``. A C type's attribute dict
    is reached through ``gc.get_referents`` of its mapping proxy and written directly; the type
    is then marked modified (``PyType_Modified``, through ``ctypes.pythonapi``) so that the
    interpreter's attribute caches forget the old method.

    Raises:
        Exception: the interpreter does not allow it (no ``ctypes``, not CPython).
    """
    try:
        setattr(cls, name, value)
        return
    except TypeError:
        pass
    import ctypes
    import gc

    referents = gc.get_referents(cls.__dict__)
    if len(referents) != 1 or not isinstance(referents[0], dict):
        raise TypeError("the attribute dict of {} is not reachable".format(cls.__name__))
    referents[0][name] = value
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


def _patch_datetime() -> Optional[str]:
    """Make ``datetime.now``/``utcnow``/``today`` and ``date.today`` read the run's clock.

    The classes stay the same objects (values, ``type(x) is datetime``, pickles, type-keyed
    tables of serialisers are untouched); only these classmethods change, for every reference
    to the class, subclasses that do not override them, and ``x.now()`` on a value.

    Returns:
        None when patched, else why not (the caller reports it as a coverage note).
    """
    try:
        _set_class_attribute(_RealDatetime, "now", classmethod(_now))
        _set_class_attribute(_RealDatetime, "utcnow", classmethod(_utcnow))
        _set_class_attribute(_RealDatetime, "today", classmethod(_today))
        _set_class_attribute(_RealDate, "today", classmethod(_today))
    except Exception as exc:  # never break start-up; the episode says the clock is partial
        return "{}: {}".format(type(exc).__name__, exc)
    return None


def install() -> Optional[str]:
    """Replace the wall-clock functions of this process (once; idempotent).

    Install it before the audit hook (`runner.runtime.egress.audit`): patching ``datetime`` looks a
    symbol up through ctypes, which the hook would report.

    Returns:
        None, or why ``datetime``'s classmethods could not be patched (``time`` always is).
    """
    if _state["installed"]:
        return datetime_problem()
    _state["installed"] = True
    _time.time = _patched_time
    _time.time_ns = _patched_time_ns
    _time.localtime = _patched_localtime
    _time.gmtime = _patched_gmtime
    _time.ctime = _patched_ctime
    _time.asctime = _patched_asctime
    _time.strftime = _patched_strftime
    if _REAL_CLOCK_GETTIME is not None and _REALTIME_ID is not None:
        _time.clock_gettime = _patched_clock_gettime
    if _REAL_CLOCK_GETTIME_NS is not None and _REALTIME_ID is not None:
        _time.clock_gettime_ns = _patched_clock_gettime_ns
    problem = _patch_datetime()
    _state["datetime_problem"] = problem
    return problem


def install_from_env() -> bool:
    """In a Python child: install the clock frozen at the reading its parent exported.

    Returns:
        True when installed; False when `ENV_CLOCK` is unset (a process outside a run) or
        not a finite number (said on stderr: the child reads the machine's clock).
    """
    text = os.environ.get(ENV_CLOCK)
    if not text:
        return False
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        sys.stderr.write(
            "sandbox-replay: {} is not a clock reading: {!r}\n".format(ENV_CLOCK, text)
        )
        return False
    install()
    set_reading(value, export=False)
    return True
