"""The httpx part of record mode: transports that record the official SDKs' model calls.

This is the one module of `runner.sdk` that imports a third-party package, and it does so only
when called: `runner.sdk` is mounted into sandboxes, which have the standard library only, and
a user's process may have no httpx at all. `runner.sdk.recorder` imports this module inside
the methods that need it (`Recorder.http_client`, ...), and this module imports ``httpx2`` (the
official SDKs' HTTP library since openai 3 / anthropic 2) or ``httpx`` (what older SDKs and
the rest of the world use) inside `library`. import-linter lists this one exception
(pyproject.toml, contract ``sandbox-side``).

What it gives the recorder:

- `transport` / `async_transport`: an httpx transport (sync or async) that records every model
  call it carries (`runner.trace.modelapi.api_for`: ``POST …/chat/completions``,
  ``…/responses``, ``…/messages``) as a ``model`` call line with the request body, the raw
  response body (a stream byte for byte, passed on to the caller chunk by chunk as it arrives)
  and the model id read from that body (`runner.sdk.exchange.ApiExchange`); other requests
  pass unrecorded and are listed as outbound. ``OpenAI(http_client=rec.http_client())`` and
  ``Anthropic(http_client=...)`` accept clients built on it.
- `install_guard`: patches the default transports of every importable library
  (``HTTPTransport.handle_request``, ``AsyncHTTPTransport.handle_async_request``), for the rest
  of the process, so that (a) a request to a tracing-ingest path (the OpenAI Agents SDK's trace
  export, `runner.trace.modelapi.is_tracing_ingest`) never leaves the machine: it is answered
  here with ``204`` and listed as refused, whichever client sent it and also after the
  recording ended (spans of a recorded run are exported seconds later); (b) while a recorder
  with ``capture_httpx`` is active in the context (or, for a bare thread, in the process),
  the model calls of clients the SDKs made themselves are recorded too. A request a recording
  transport already carries is marked in its extensions and never recorded twice.
"""

import importlib
import importlib.util
import json
import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit

from runner.trace.modelapi import api_for, is_tracing_ingest, retrieval_request

__all__ = ["LIBRARIES", "async_transport", "install_guard", "library", "transport"]

LIBRARIES = ("httpx2", "httpx")
MARK = "sandbox_replay.recorded"
log = logging.getLogger("runner.sdk.record")

_GUARDED: Dict[str, bool] = {}
_GUARD_LOCK = threading.Lock()
_CLASSES: Dict[str, Dict[str, type]] = {}


def _no_recorder() -> Any:
    return None


# ``() -> recorder or None``: who captures the default transports' model calls in the calling
# context (`install_guard` sets it; the recorder decides, this module knows no recorder).
_capturing: Callable[[], Any] = _no_recorder


def library(name: Optional[str] = None) -> Any:
    """The HTTP library module ``name`` (``httpx2`` or ``httpx``; None: the first importable).

    Raises:
        ImportError: it is not installed (or neither is).
        ValueError: another name.
    """
    if name is not None and name not in LIBRARIES:
        raise ValueError("library must be one of {}, not {!r}".format(LIBRARIES, name))
    names = (name,) if name is not None else LIBRARIES
    for candidate in names:
        # Imported here, by name, and only when a recording needs it: runner.sdk is mounted
        # into sandboxes (standard library only) and must import where no httpx exists.
        if importlib.util.find_spec(candidate) is not None:
            return importlib.import_module(candidate)
    raise ImportError("recording model calls needs httpx2 or httpx (the official SDKs bring one)")


def _clean_url(url: Any) -> str:
    """The URL without its query (a key may travel there) and user information."""
    parts = urlsplit(str(url))
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _destination(request: Any) -> Dict[str, Any]:
    url = request.url
    port = url.port or (443 if url.scheme == "https" else 80)
    return {"kind": "http", "host": str(url.host), "port": port, "path": str(url.path)[:512]}


def _model_request(request: Any) -> Optional[Tuple[str, Dict[str, Any]]]:
    """``(api, request body)`` of a model call whose body has been read, else None."""
    api = api_for(request.method, str(request.url.path))
    if api is None:
        return None
    if api == "responses_retrieve":  # a GET: no body, the id is the request
        retrieval = retrieval_request(str(request.url.path))
        return (api, retrieval) if retrieval is not None else None
    try:
        body = json.loads(request.content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return (api, body) if isinstance(body, dict) else None


def _decoder(lib: Any) -> Callable[[bytes, str], bytes]:
    def decode(raw: bytes, encoding: str) -> bytes:
        content: bytes = lib.Response(
            200, headers={"content-encoding": encoding}, content=raw
        ).read()
        return content

    return decode


def _classes(lib: Any) -> Dict[str, type]:
    """The recording transport and stream classes of one library (made once, then cached).

    They subclass the library's own base classes (its client checks ``isinstance`` of the
    response stream), so they are made per library at run time.
    """
    found = _CLASSES.get(lib.__name__)
    if found is not None:
        return found
    decode = _decoder(lib)

    class _Stream(lib.SyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any, exchange: Any) -> None:
            self._inner, self._exchange = inner, exchange

        def __iter__(self) -> Any:
            try:
                for chunk in self._inner:
                    self._exchange.add(chunk)
                    yield chunk
            except GeneratorExit:  # the caller stopped reading: what it read is the record
                self._exchange.finish(incomplete=True, decode=decode)
                raise
            except BaseException as exc:
                self._exchange.finish(error=exc, decode=decode)
                raise
            self._exchange.finish(decode=decode)

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._exchange.finish(incomplete=True, decode=decode)

    class _AsyncStream(lib.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any, exchange: Any) -> None:
            self._inner, self._exchange = inner, exchange

        async def __aiter__(self) -> Any:
            try:
                async for chunk in self._inner:
                    self._exchange.add(chunk)
                    yield chunk
            except GeneratorExit:
                self._exchange.finish(incomplete=True, decode=decode)
                raise
            except BaseException as exc:
                self._exchange.finish(error=exc, decode=decode)
                raise
            self._exchange.finish(decode=decode)

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._exchange.finish(incomplete=True, decode=decode)

    def _respond(response: Any, exchange: Any, stream_class: type) -> Any:
        exchange.response(
            response.status_code,
            response.headers.get("content-type"),
            response.headers.get("content-encoding"),
        )
        return lib.Response(
            response.status_code,
            headers=response.headers,
            stream=stream_class(response.stream, exchange),
            extensions=response.extensions,
        )

    class _Transport(lib.BaseTransport):  # type: ignore[misc]
        def __init__(self, recorder: Any, inner: Any) -> None:
            self._recorder, self._inner = recorder, inner

        def handle_request(self, request: Any) -> Any:
            if is_tracing_ingest(str(request.url.path)):
                return _refuse(lib, request, self._recorder)
            request.read()
            exchange = _start(self._recorder, request)
            if exchange is None:
                return self._inner.handle_request(request)
            try:
                response = self._inner.handle_request(request)
            except BaseException as exc:
                exchange.finish(error=exc)
                raise
            return _respond(response, exchange, _Stream)

        def close(self) -> None:
            self._inner.close()

    class _AsyncTransport(lib.AsyncBaseTransport):  # type: ignore[misc]
        def __init__(self, recorder: Any, inner: Any) -> None:
            self._recorder, self._inner = recorder, inner

        async def handle_async_request(self, request: Any) -> Any:
            if is_tracing_ingest(str(request.url.path)):
                return _refuse(lib, request, self._recorder)
            await request.aread()
            exchange = _start(self._recorder, request)
            if exchange is None:
                return await self._inner.handle_async_request(request)
            try:
                response = await self._inner.handle_async_request(request)
            except BaseException as exc:
                exchange.finish(error=exc)
                raise
            return _respond(response, exchange, _AsyncStream)

        async def aclose(self) -> None:
            await self._inner.aclose()

    found = {
        "Transport": _Transport,
        "AsyncTransport": _AsyncTransport,
        "Stream": _Stream,
        "AsyncStream": _AsyncStream,
    }
    _CLASSES[lib.__name__] = found
    return found


def _start(recorder: Any, request: Any) -> Any:
    """Begin recording ``request`` (its body read) with ``recorder``; None: pass it on as is."""
    if recorder is None or not recorder.active or request.extensions.get(MARK):
        return None
    request.extensions[MARK] = True  # the default transport underneath must not record it again
    found = _model_request(request)
    if found is None:
        recorder.note_outbound(dict(_destination(request), outcome="not_recorded"))
        return None
    api, body = found
    return recorder.begin_exchange(api, body, request.method, _clean_url(request.url))


def _refuse(lib: Any, request: Any, recorder: Any) -> Any:
    """Answer a tracing-ingest request here (``204``, nothing sent) and note it."""
    entry = dict(_destination(request), outcome="refused", reason="tracing_ingest")
    if recorder is not None and recorder.active:
        recorder.note_outbound(entry)
    log.info("tracing export refused by sandbox-replay record: %s", entry["host"])
    return lib.Response(204, headers={"content-length": "0"})


def transport(recorder: Any, inner: Any = None, name: Optional[str] = None) -> Any:
    """A sync recording transport of ``recorder`` over ``inner`` (default: the library's own).

    Raises:
        ImportError: no HTTP library is installed.
    """
    lib = library(name)
    return _classes(lib)["Transport"](recorder, inner or lib.HTTPTransport())


def async_transport(recorder: Any, inner: Any = None, name: Optional[str] = None) -> Any:
    """An async recording transport of ``recorder`` over ``inner`` (see `transport`).

    Raises:
        ImportError: no HTTP library is installed.
    """
    lib = library(name)
    return _classes(lib)["AsyncTransport"](recorder, inner or lib.AsyncHTTPTransport())


def install_guard(capturing: Callable[[], Any]) -> List[str]:
    """Patch the default transports of every importable library (once); their names.

    See the module docstring: tracing exports are answered here for the rest of the process,
    and model calls are recorded while a capturing recorder is active.

    Args:
        capturing: ``() -> recorder or None``: the recorder that captures the default
            transports' model calls in the calling context (the latest one given is used).
    """
    global _capturing
    patched = []
    with _GUARD_LOCK:
        _capturing = capturing
        for name in LIBRARIES:
            if _GUARDED.get(name):
                patched.append(name)
                continue
            try:
                lib = library(name)
            except ImportError:
                continue
            _patch(lib)
            _GUARDED[name] = True
            patched.append(name)
    return patched


def _patch(lib: Any) -> None:
    classes = _classes(lib)
    sync_original = lib.HTTPTransport.handle_request
    async_original = lib.AsyncHTTPTransport.handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        if is_tracing_ingest(str(request.url.path)):
            return _refuse(lib, request, _capturing())
        recorder = None if request.extensions.get(MARK) else _capturing()
        if recorder is None:
            return sync_original(self, request)
        request.read()
        return classes["Transport"](recorder, _Bound(self, sync_original)).handle_request(request)

    async def handle_async_request(self: Any, request: Any) -> Any:
        if is_tracing_ingest(str(request.url.path)):
            return _refuse(lib, request, _capturing())
        recorder = None if request.extensions.get(MARK) else _capturing()
        if recorder is None:
            return await async_original(self, request)
        inner = _AsyncBound(self, async_original)
        return await classes["AsyncTransport"](recorder, inner).handle_async_request(request)

    handle_request.__wrapped__ = sync_original  # type: ignore[attr-defined]
    handle_async_request.__wrapped__ = async_original  # type: ignore[attr-defined]
    lib.HTTPTransport.handle_request = handle_request
    lib.AsyncHTTPTransport.handle_async_request = handle_async_request


class _Bound:
    """A default transport's original method, as an inner transport of a recording one."""

    def __init__(self, owner: Any, method: Callable[..., Any]) -> None:
        self._owner, self._method = owner, method

    def handle_request(self, request: Any) -> Any:
        return self._method(self._owner, request)

    def close(self) -> None:  # the client closes its own transport
        pass


class _AsyncBound:
    """The async counterpart of `_Bound`."""

    def __init__(self, owner: Any, method: Callable[..., Any]) -> None:
        self._owner, self._method = owner, method

    async def handle_async_request(self, request: Any) -> Any:
        return await self._method(self._owner, request)

    async def aclose(self) -> None:
        pass
