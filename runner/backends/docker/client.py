"""The docker SDK boundary: connecting, translating errors, retrying idempotent calls.

Every exception of the docker SDK (and of `requests` underneath it) is turned into the project's
own here, with ``raise ... from exc``:

- engine unreachable (no socket, refused, wrong host) -> `InfrastructureError` whose one-line
  message names the address, why that engine was chosen (`runner.backends.docker.engine`) and
  the fix;
- a missing image -> `InfrastructureError` naming ``sandbox-replay image build`` (`image_fix`);
- 5xx "try again" answers, engine timeouts, aborted connections -> `TransientInfrastructureError`
  (the only family `retrying` retries);
- anything else -> `InfrastructureError` with the engine's explanation.

Invariant: `retrying` wraps only calls that are idempotent (inspect, start, kill, wait, remove,
list, ping, version); ``create`` is made idempotent by deterministic names (see backend.py).
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import docker
import docker.errors
import requests.exceptions
import tenacity

from runner.backends.docker.engine import Engine, discover_engine, engine_fix
from runner.errors import InfrastructureError, TransientInfrastructureError
from runner.hostlog import get_logger

log = get_logger(__name__)

T = TypeVar("T")

ENGINE_FIX = engine_fix()


def image_fix(platform: str | None = None) -> str:
    """The fix line for a missing sandbox image, worded for ``platform`` (default this host's).

    ``image build`` pulls its base from a registry when it can and falls back to the offline
    base on its own (`runner.backends.docker.image`), so the plain command is right everywhere;
    ``--offline`` (debootstrap, root) is named on Linux only, where it can work.
    """
    if (platform or sys.platform).startswith("linux"):
        return (
            "run `sandbox-replay image build` (pulls its base; with no registry: "
            "`sandbox-replay image build --offline`, needs root and debootstrap)"
        )
    return "run `sandbox-replay image build` (the engine pulls its Python base image once)"


IMAGE_FIX = image_fix()

_TRANSIENT_STATUS = frozenset({408, 429, 502, 503, 504})
_TRANSIENT_WORDS = (
    "try again",
    "temporarily",
    "timeout",
    "timed out",
    "connection reset",
    "already in progress",
    "is restarting",
)
_UNREACHABLE_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.ECONNREFUSED,
        errno.EACCES,
        errno.ENOTSOCK,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ECONNABORTED,
    }
)


def engine_address(docker_host: str | None = None) -> str:
    """The engine address a client would use (`discover_engine`'s choice; "" if none can be).

    Args:
        docker_host: an explicit address (settings), or None.
    """
    try:
        return discover_engine(docker_host).address
    except InfrastructureError as exc:
        return str(exc.fields.get("address", ""))


def _root_oserror(exc: BaseException) -> OSError | None:
    """The first OSError with an errno in ``exc``'s cause/context/args chain (requests nests)."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return current
        for nxt in (current.__cause__, current.__context__, *current.args):
            if isinstance(nxt, BaseException):
                stack.append(nxt)
    return None


def unreachable_error(
    address: str, exc: BaseException, engine: Engine | None = None
) -> InfrastructureError:
    """The one-line error for an engine that cannot be reached at ``address``.

    Args:
        address: the engine address.
        exc: the SDK's or the socket's error.
        engine: how the engine was chosen, named in the message (None: not known here).
    """
    root = _root_oserror(exc)
    reason = root.strerror if root is not None and root.strerror else type(exc).__name__
    chosen = f", chosen by {engine.reason}" if engine is not None else ""
    return InfrastructureError(
        f"Docker engine not reachable at {address} ({reason}{chosen}); fix: {ENGINE_FIX}",
        address=address,
        reason=reason,
        chosen=engine.reason if engine is not None else "",
        fix=ENGINE_FIX,
    )


def translate(exc: BaseException, action: str, address: str = "") -> InfrastructureError:
    """Map one docker SDK / requests exception onto the project's infrastructure errors.

    Args:
        exc: the exception raised by the SDK.
        action: what was being done, e.g. ``"create container sandbox-replay-r1"``.
        address: the engine address, named in "not reachable" messages.

    Returns:
        The error to raise (``raise translate(exc, ...) from exc``).
    """
    if isinstance(exc, InfrastructureError):
        return exc
    if isinstance(exc, docker.errors.ImageNotFound):
        return InfrastructureError(
            f"{action}: image not found ({exc.explanation}); fix: {image_fix()}",
            action=action,
            status=404,
        )
    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code or 0
        explanation = str(exc.explanation or exc).strip()
        message = f"{action}: Docker engine answered {status}: {explanation}"
        lowered = explanation.lower()
        # 409 is a conflict ("removal ... already in progress") only transient by its words.
        if status in _TRANSIENT_STATUS or (
            (status >= 500 or status == 409) and any(word in lowered for word in _TRANSIENT_WORDS)
        ):
            return TransientInfrastructureError(message, action=action, status=status)
        return InfrastructureError(message, action=action, status=status)
    if isinstance(exc, requests.exceptions.Timeout):
        return TransientInfrastructureError(
            f"{action}: Docker engine did not answer in time ({exc})", action=action
        )
    if isinstance(exc, requests.exceptions.ConnectionError | docker.errors.DockerException):
        root = _root_oserror(exc)
        if root is not None and root.errno in _UNREACHABLE_ERRNOS:
            return unreachable_error(address or engine_address(), exc)
        if isinstance(exc, requests.exceptions.ConnectionError):
            return TransientInfrastructureError(
                f"{action}: connection to the Docker engine broke ({exc})", action=action
            )
        return InfrastructureError(f"{action}: {exc}", action=action)
    return InfrastructureError(f"{action}: {type(exc).__name__}: {exc}", action=action)


def call(action: str, fn: Callable[..., T], *args: Any, address: str = "", **kwargs: Any) -> T:
    """Call ``fn`` once, translating SDK exceptions (no retry: for non-idempotent calls).

    Raises:
        InfrastructureError: the call failed (`TransientInfrastructureError` when retryable).
    """
    try:
        return fn(*args, **kwargs)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise translate(exc, action, address) from exc


def retrying(
    action: str,
    fn: Callable[..., T],
    *args: Any,
    attempts: int = 4,
    address: str = "",
    **kwargs: Any,
) -> T:
    """Call an *idempotent* ``fn``, retrying only transient failures with exponential backoff.

    Args:
        action: description for errors and logs.
        fn: the SDK call; must be safe to repeat.
        *args: positional arguments of ``fn``.
        attempts: total attempts (first one included).
        address: engine address for "not reachable" messages.
        **kwargs: keyword arguments of ``fn``.

    Raises:
        InfrastructureError: a permanent failure (at once) or the last transient one.
    """
    retryer = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(TransientInfrastructureError),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=0.2, max=2.0),
        reraise=True,
        before_sleep=lambda state: log.warning(
            "docker_call_retry",
            action=action,
            attempt=state.attempt_number,
            error=str(state.outcome.exception()) if state.outcome else "",
        ),
    )
    result: T = retryer(call, action, fn, *args, address=address, **kwargs)
    return result


def connect(
    docker_host: str | None = None, timeout_s: float = 60.0, *, engine: Engine | None = None
) -> docker.APIClient:
    """A low-level client for the engine, with the API version negotiated.

    Args:
        docker_host: explicit address (settings); None: `discover_engine` picks one
            (``DOCKER_HOST``, the docker context, the platform default, Podman's socket).
        timeout_s: HTTP timeout of each call, seconds.
        engine: the engine already discovered (then ``docker_host`` is not looked at).

    Raises:
        InfrastructureError: the engine is unreachable or unusable (one-line message naming
            the address, why it was chosen and the fix), or a named docker context cannot be
            read.
    """
    engine = engine or discover_engine(docker_host)
    try:
        return docker.APIClient(
            version="auto", timeout=int(max(1, timeout_s)), **engine.client_kwargs()
        )
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        error = translate(exc, "connect to the Docker engine", engine.address)
        if error.fields.get("fix") == ENGINE_FIX:
            raise unreachable_error(engine.address, exc, engine) from exc
        raise error from exc
