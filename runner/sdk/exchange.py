"""One model HTTP exchange of record mode, from request to the last byte of its response.

Standard library only, Python 3.9+. The httpx transports of `runner.sdk.httpxrecord` feed it;
it knows nothing of httpx. An exchange takes its call index and clock reading when the request
is sent (`runner.sdk.recorder.Recorder.begin_exchange`), collects the response bytes as the
caller reads them (a stream is passed on chunk by chunk, never held back) and writes the call
line once, when the body ended, the caller closed it, the transport failed, or the recording
ended first:

    {"tool": "model", "api": "chat_completions", "request": {...}, "http_status": 200,
     "body": "<raw body or event stream>", "body_encoding": "text", "model": "<from the body>",
     "model_source": "response", "usage": {...}, "clock": ..., "duration_s": ...,
     "source": "provider", "raw_io": true,
     "meta": {"method": "POST", "url": "...", "content_type": "...", "stream": true}}

The body is the response body exactly as the server sent it once its HTTP content encoding is
removed (``content_encoding`` names it, as for raw I/O tool calls); a stream is the raw event
stream. A response the caller closed before its end keeps the bytes read and says
``meta.incomplete: true``; a transport error is the record's ``error``.
"""

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.sdk.httpio import _decode_content
from runner.trace.format import TRACE_VERSION, encode_body
from runner.trace.modelapi import summarise

__all__ = ["MAX_OUTBOUND", "ApiExchange", "ModelCallRecording", "error_class"]

MAX_OUTBOUND = 1000


def error_class(exc: BaseException) -> str:
    """The trace's name of an exception's class: ``recorded_class``, else qualified."""
    cls = type(exc)
    recorded = getattr(exc, "recorded_class", None)
    if isinstance(recorded, str):
        return recorded
    if cls.__module__ in ("builtins", "__main__"):
        return cls.__qualname__
    return "{}.{}".format(cls.__module__, cls.__qualname__)


class ApiExchange:
    """The model call being recorded; see the module docstring.

    Args:
        store: ``(index, record) -> None``: puts the finished call line in its place.
        index, reading: the call index and clock reading taken when the request was sent.
        api: one of `runner.trace.modelapi.APIS`.
        request: the request body (a JSON object) as the program sent it.
        method, url: of the request (kept in ``meta``).
        error_class: ``exception -> qualified class name`` (the recorder's rule).
    """

    def __init__(
        self,
        store: Callable[[int, Dict[str, Any]], None],
        index: int,
        reading: float,
        api: str,
        request: Dict[str, Any],
        method: str,
        url: str,
        error_class: Callable[[BaseException], str],
    ) -> None:
        self.index = index
        self._store = store
        self._reading = reading
        self._api = api
        self._request = request
        self._meta: Dict[str, Any] = {"method": method, "url": url}
        self._error_class = error_class
        self._chunks: List[bytes] = []
        self._status: Optional[int] = None
        self._content_type: Optional[str] = None
        self._content_encoding: Optional[str] = None
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self.done = False

    def response(
        self, status: int, content_type: Optional[str], content_encoding: Optional[str]
    ) -> None:
        """Note the response's status line and headers (before its body is read)."""
        self._status = status
        self._content_type = content_type
        encoding = (content_encoding or "").strip().lower()
        self._content_encoding = encoding if encoding not in ("", "identity") else None

    def add(self, chunk: bytes) -> None:
        """Keep one chunk of the response body, as received."""
        self._chunks.append(bytes(chunk))

    def finish(
        self,
        error: Optional[BaseException] = None,
        incomplete: bool = False,
        decode: Optional[Callable[[bytes, str], bytes]] = None,
    ) -> None:
        """Write the call line (once; later calls do nothing).

        Args:
            error: the exception that ended the exchange (the transport failed).
            incomplete: the body was not read to its end.
            decode: ``(raw, content encoding) -> body`` for an encoding the standard library
                does not know (the transport passes its HTTP library's decoder).
        """
        with self._lock:
            if self.done:
                return
            self.done = True
        raw = b"".join(self._chunks)
        record: Dict[str, Any] = {
            "v": TRACE_VERSION,
            "type": "call",
            "index": self.index,
            "tool": "model",
            "api": self._api,
            "request": self._request,
            "clock": self._reading,
            "duration_s": round(time.monotonic() - self._started, 6),
            "source": "provider",
            "raw_io": True,
        }
        if self._status is not None:
            record["http_status"] = self._status
        body = raw
        if self._content_encoding is not None and raw:
            try:
                decoded = _decode_content(raw, self._content_encoding)
                if decoded is raw and decode is not None:
                    decoded = decode(raw, self._content_encoding)
                body = decoded
                record["content_encoding"] = self._content_encoding
            except Exception:  # undecodable: keep the bytes as received
                self._meta["content_encoding"] = self._content_encoding
        if self._status is not None or raw:
            record.update(encode_body(body))
        text = body.decode("utf-8", "replace")
        stream = "text/event-stream" in (self._content_type or "") or (
            self._request.get("stream") is True and text.lstrip().startswith(("event:", "data:"))
        )
        model, usage = summarise(self._api, text, stream)
        if model is not None:
            record["model"] = model
            record["model_source"] = "response"
        if usage:
            record["usage"] = usage
        meta = dict(self._meta)
        if self._content_type:
            meta["content_type"] = self._content_type
        if stream:
            meta["stream"] = True
        if incomplete and error is None:
            meta["incomplete"] = True
        record["meta"] = meta
        if error is not None:
            record["error"] = {"class": self._error_class(error), "message": str(error)[:4096]}
        self._store(self.index, record)


class ModelCallRecording:
    """The model-call part of `runner.sdk.recorder.Recorder`: httpx clients and exchanges.

    A mixin: the recorder provides ``_next() -> (index, clock reading)``, ``_lock``,
    ``calls`` and ``active``; this class keeps the exchanges in flight and
    the outbound destinations.
    """

    calls: List[Dict[str, Any]]
    active: bool
    _lock: threading.Lock

    def __init__(self) -> None:
        self.outbound: List[Dict[str, Any]] = []
        self.outbound_dropped = 0
        self._pending: Dict[int, ApiExchange] = {}

    def _next(self) -> Tuple[int, float]:
        raise NotImplementedError

    def _finish_pending(self) -> None:
        """Write the call lines of responses nobody read to their end (``meta.incomplete``)."""
        for exchange in list(self._pending.values()):
            exchange.finish(incomplete=True)

    # -- model calls over httpx (runner.sdk.httpxrecord) ----------------------------------------

    def http_client(self, library: Optional[str] = None, **options: Any) -> Any:
        """An httpx client whose model calls are recorded, for the official SDKs.

        For example::

            client = OpenAI(http_client=rec.http_client())
            client = Anthropic(http_client=rec.http_client())

        Args:
            library: ``httpx2`` (what openai >= 3 and anthropic >= 2 use) or ``httpx``; None:
                the first of them that is installed.
            options: passed to the library's ``Client`` (``timeout``, ``headers``, ...).

        Raises:
            ImportError: neither library is installed.
        """
        from runner.sdk import httpxrecord  # httpx only here: the sandbox side has none

        lib = httpxrecord.library(library)
        return lib.Client(transport=httpxrecord.transport(self, name=lib.__name__), **options)

    def async_http_client(self, library: Optional[str] = None, **options: Any) -> Any:
        """An async httpx client whose model calls are recorded (``AsyncOpenAI(http_client=...)``).

        See `http_client`.

        Raises:
            ImportError: neither library is installed.
        """
        from runner.sdk import httpxrecord

        lib = httpxrecord.library(library)
        transport = httpxrecord.async_transport(self, name=lib.__name__)
        return lib.AsyncClient(transport=transport, **options)

    def transport(self, inner: Any = None, library: Optional[str] = None) -> Any:
        """A recording sync transport over ``inner`` (default: the library's own transport).

        For clients built elsewhere: ``httpx2.Client(transport=rec.transport(my_transport))``.

        Raises:
            ImportError: neither library is installed.
        """
        from runner.sdk import httpxrecord

        return httpxrecord.transport(self, inner, library)

    def async_transport(self, inner: Any = None, library: Optional[str] = None) -> Any:
        """A recording async transport over ``inner`` (see `transport`).

        Raises:
            ImportError: neither library is installed.
        """
        from runner.sdk import httpxrecord

        return httpxrecord.async_transport(self, inner, library)

    def begin_exchange(
        self, api: str, request: Dict[str, Any], method: str, url: str
    ) -> ApiExchange:
        """Start recording one model HTTP call (called by the transports as it is sent).

        Takes the call's index and clock reading now; the call line is written when the
        exchange finishes (`runner.sdk.exchange.ApiExchange`), or at the end of the recording.
        """
        index, reading = self._next()
        exchange = ApiExchange(
            self._finish_exchange, index, reading, api, request, method, url, error_class
        )
        with self._lock:
            self._pending[index] = exchange
        return exchange

    def _finish_exchange(self, index: int, record: Dict[str, Any]) -> None:
        with self._lock:
            self._pending.pop(index, None)
            self.calls[index] = record

    def note_outbound(self, entry: Dict[str, Any]) -> None:
        """List one destination in the end line's ``outbound`` (at most 1000, then counted)."""
        with self._lock:
            if len(self.outbound) < MAX_OUTBOUND:
                self.outbound.append(dict(entry))
            else:
                self.outbound_dropped += 1
