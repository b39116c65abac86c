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
- ``datetime.datetime`` and ``datetime.date`` in the ``datetime`` module by subclasses whose
  ``now``/``utcnow``/``today`` read the clock. ``datetime.datetime`` is a C type whose
  attributes cannot be set, hence subclasses. They are façades: the values they make are
  instances of the original classes (so exact-type checks of serialisers and C extensions
  still accept them); ``isinstance``/``issubclass`` against a façade accept the original
  classes (a metaclass); they keep the names ``datetime.datetime``/``datetime.date``, so
  pickles are unchanged (a ``copyreg`` reducer names the façade, which builds an original
  value again). Code that imports ``datetime`` after `install` gets the façades, also ``from
  datetime import datetime`` in tool modules. Known gaps: ``type(x) is datetime.datetime`` is
  now false for a value, and ``type(x).now()`` or ``x.now()`` (the original class's
  classmethod) read the machine's clock; ``date.today()`` of the original class reads
  ``time.time`` and so the run's clock.

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
import copyreg
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
    return now()


@_wraps(_time.time_ns)
def _patched_time_ns() -> int:
    value = reading()
    return _REAL_TIME_NS() if value is None else _ns(value)


@_wraps(_time.localtime)
def _patched_localtime(secs: Optional[float] = None) -> Any:
    return _REAL_LOCALTIME(now() if secs is None else secs)


@_wraps(_time.gmtime)
def _patched_gmtime(secs: Optional[float] = None) -> Any:
    return _REAL_GMTIME(now() if secs is None else secs)


@_wraps(_time.ctime)
def _patched_ctime(secs: Optional[float] = None) -> str:
    return _REAL_CTIME(now() if secs is None else secs)


@_wraps(_time.asctime)
def _patched_asctime(t: Any = None) -> str:
    return _REAL_ASCTIME(_REAL_LOCALTIME(now()) if t is None else t)


@_wraps(_time.strftime)
def _patched_strftime(format: str, t: Any = None) -> str:
    return _REAL_STRFTIME(format, _REAL_LOCALTIME(now()) if t is None else t)


@_wraps(_REAL_CLOCK_GETTIME)
def _patched_clock_gettime(clk_id: int) -> float:
    if clk_id == _REALTIME_ID:
        return now()
    assert _REAL_CLOCK_GETTIME is not None
    return _REAL_CLOCK_GETTIME(clk_id)  # type: ignore[no-any-return]


@_wraps(_REAL_CLOCK_GETTIME_NS)
def _patched_clock_gettime_ns(clk_id: int) -> int:
    if clk_id == _REALTIME_ID:
        value = reading()
        if value is not None:
            return _ns(value)
    assert _REAL_CLOCK_GETTIME_NS is not None
    return _REAL_CLOCK_GETTIME_NS(clk_id)  # type: ignore[no-any-return]


class _DateMeta(type):
    """``isinstance(x, date)`` is true for instances of the original ``datetime.date`` too."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _RealDate)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, _RealDate)


class _DatetimeMeta(_DateMeta):
    """``isinstance(x, datetime)`` is true for instances of the original class too."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _RealDatetime)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, _RealDatetime)


class date(_RealDate, metaclass=_DateMeta):
    """``datetime.date`` whose ``today()`` is the run's; its values are original dates.

    A façade: constructing it (directly, or through ``fromtimestamp``, ``fromisoformat``, ...,
    which call the class) returns an instance of the original class, so values behave exactly
    as before (exact-type checks of C extensions and serialisers, ``sqlite3`` adapters). A
    user class derived from it is constructed as usual.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """An original ``datetime.date`` (a derived class: an instance of that class)."""
        if cls is date:
            return _RealDate(*args, **kwargs)
        return super().__new__(cls, *args, **kwargs)

    @classmethod
    def today(cls) -> Any:
        """The run's current local date."""
        return cls.fromtimestamp(now())


class datetime(_RealDatetime, metaclass=_DatetimeMeta):
    """``datetime.datetime`` whose ``now()``, ``utcnow()``, ``today()`` are the run's (a façade).

    Its values are instances of the original class, as for `date`.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """An original ``datetime.datetime`` (a derived class: an instance of that class)."""
        if cls is datetime:
            return _RealDatetime(*args, **kwargs)
        return super().__new__(cls, *args, **kwargs)

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        """The run's current time (local, or in ``tz``)."""
        value = reading()
        if value is None:
            return super().now(tz)
        return cls.fromtimestamp(value, tz)

    @classmethod
    def utcnow(cls) -> Any:
        """The run's current UTC time, naive."""
        value = reading()
        if value is None:
            value = real_time()
        return cls.fromtimestamp(value, _dt.timezone.utc).replace(tzinfo=None)

    @classmethod
    def today(cls) -> Any:
        """The run's current local time, naive."""
        return cls.fromtimestamp(now())


for _cls, _name in ((date, "date"), (datetime, "datetime")):
    _cls.__module__ = "datetime"
    _cls.__name__ = _name
    _cls.__qualname__ = _name


def _reduce_date(obj: Any) -> Any:
    return (date, obj.__reduce__()[1])


def _reduce_datetime(obj: Any) -> Any:
    return (datetime, obj.__reduce__()[1])


def install() -> None:
    """Replace the wall-clock functions and classes of this process (once; idempotent)."""
    if _state["installed"]:
        return
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
    _dt.date = date  # type: ignore[misc]
    _dt.datetime = datetime  # type: ignore[misc]
    # an instance of an original class (made by code that took it before) must still pickle:
    # pickle would find datetime.datetime is no longer that class
    copyreg.pickle(_RealDate, _reduce_date)
    copyreg.pickle(_RealDatetime, _reduce_datetime)


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
