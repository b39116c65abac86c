"""Errors the in-sandbox runtime raises while serving and executing calls.

Standard library only, Python 3.9+. They extend the project hierarchy (`runner.errors`):

    SandboxReplayError
    ├── RecordedError                 a recorded error, raised again; keeps the recorded class
    ├── ModelCallError                the host could not answer a model/user turn
    ├── WorkflowError                 the workflow cannot go on (templating, step shape)
    └── ReplayDivergence
        ├── UnrecordedCall            no recording serves this call (strict: never goes live)
        └── PureResultMismatch        a pure tool returned something else than recorded

`error_class_name` is the one place that turns an exception into the ``class`` string of a
trace call record: the qualified name, except for errors that carry a remote or recorded class.
"""

from typing import Any, Dict, List, Optional

from runner.errors import ReplayDivergence, SandboxReplayError


class RecordedError(SandboxReplayError):
    """A call whose recording is an error: raised again with the recorded class and message.

    The sandbox image may not have the original class, so this generic error carries its name
    (``recorded_class``); traces and failure signatures use that name.
    """

    def __init__(self, recorded_class: str, message: str, **fields: Any) -> None:
        super().__init__(message, recorded_class=recorded_class, **fields)
        self.recorded_class = recorded_class


class ModelCallError(SandboxReplayError):
    """A model (or simulated user) turn failed: the host returned an error or an unusable body.

    ``remote_class`` is the class the host named (e.g. ``runner.errors.CeilingReached``), if any.
    """

    def __init__(self, message: str, remote_class: Optional[str] = None, **fields: Any) -> None:
        super().__init__(message, remote_class=remote_class, **fields)
        self.remote_class = remote_class


class WorkflowError(SandboxReplayError):
    """The normalised workflow cannot be executed as written (a bad reference or step)."""


class UnrecordedCall(ReplayDivergence):
    """A call with no recording to serve it (strict mode: it never goes live).

    Attributes (also in ``fields``): ``tool_id``, ``args``, ``index`` (reproduce), ``nearest``
    (the nearest recorded call, or None) and ``differing`` (its fields that differ).
    """

    def __init__(
        self,
        message: str,
        tool_id: str,
        args: Any,
        nearest: Optional[Dict[str, Any]] = None,
        differing: Optional[List[str]] = None,
        **fields: Any,
    ) -> None:
        super().__init__(
            message, tool_id=tool_id, args=args, nearest=nearest, differing=differing, **fields
        )
        self.tool_id = tool_id
        self.args = args
        self.nearest = nearest
        self.differing = list(differing or [])


class PureResultMismatch(ReplayDivergence):
    """A ``pure`` tool executed during reproduce returned another body than the recorded one."""


def error_class_name(exc: BaseException) -> str:
    """The ``class`` string of a call record's ``error`` for ``exc``.

    Builtins are bare (``KeyError``); others are ``module.QualName``; a `RecordedError` gives
    its recorded class and a `ModelCallError` the host's class when it named one.
    """
    if isinstance(exc, RecordedError):
        return exc.recorded_class
    if isinstance(exc, ModelCallError) and exc.remote_class:
        return exc.remote_class
    return class_name(type(exc))


def class_name(cls: type) -> str:
    """The ``class`` string a trace records for exceptions of ``cls`` (no recorded class).

    Builtins (and classes of ``__main__``) are bare, e.g. ``KeyError``; others
    ``module.QualName``, e.g. ``runner.wire.errors.UnrecordedCall``. Readers that look for
    one class (the report's unrecorded reads) compare with this, never with a short name.
    """
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return "{}.{}".format(module, cls.__qualname__)


def error_record(exc: BaseException) -> Dict[str, str]:
    """``{"class": ..., "message": ...}`` of a call record for ``exc``.

    Never raises: an exception whose ``__str__`` fails (tool code can define one) is recorded
    with a message saying so, so that its call record and the failure still name the tool.
    """
    try:
        message = exc.message if isinstance(exc, SandboxReplayError) else str(exc)
        if not isinstance(message, str):
            message = repr(message)
    except Exception as inner:  # a hostile or broken __str__
        message = "<str() of this {} raised {}>".format(type(exc).__name__, type(inner).__name__)
    return {"class": error_class_name(exc), "message": message[:4096]}
