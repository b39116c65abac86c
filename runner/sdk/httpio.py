"""The SDK's recording HTTP helper, for tools whose raw HTTP body belongs in the trace.

Tools that do their I/O through it get the raw HTTP body into the trace, and on reproduce their
own parsing runs again on the recorded body.

Standard library only, Python 3.9+ (imported inside sandboxes; `runner.sdk` re-exports
`http_request`, `http_get` and `HttpResponse`). The runtime (runner.sdk.rawio) and record
mode (runner.sdk.recorder) set `HTTP_SINK` / `HTTP_SOURCE`.
"""

import contextvars
import json
from typing import Any, Callable, Dict, List, Optional

__all__ = ["HTTP_SINK", "HTTP_SOURCE", "HttpResponse", "http_get", "http_request"]


# ``HTTP_SINK``: a list that receives one exchange dict per request (set while a call is
# recorded); ``HTTP_SOURCE``: a callable serving requests from a recording (reproduce) instead
# of doing I/O. Both are set by the runtime (runner.sdk.rawio) and by runner.sdk.recorder.
HTTP_SINK: "contextvars.ContextVar[Optional[List[Dict[str, Any]]]]" = contextvars.ContextVar(
    "sandbox_replay_http_sink", default=None
)
HTTP_SOURCE: "contextvars.ContextVar[Optional[Callable[..., Dict[str, Any]]]]" = (
    contextvars.ContextVar("sandbox_replay_http_source", default=None)
)


class HttpResponse:
    """The response of `http_request`: status, headers and the raw (decoded) body bytes.

    Attributes:
        status: HTTP status code (an error status is a response, not an exception).
        headers: response headers, lower-case names.
        body: the body bytes, gzip/deflate content encoding already removed.
        url: the requested URL.
        content_encoding: the original ``Content-Encoding`` (``gzip``), or None.
    """

    __slots__ = ("body", "content_encoding", "headers", "status", "url")

    def __init__(
        self,
        status: int,
        headers: Dict[str, str],
        body: bytes,
        url: str,
        content_encoding: Optional[str] = None,
    ) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
        self.content_encoding = content_encoding

    def text(self, encoding: str = "utf-8") -> str:
        """The body decoded as text (undecodable bytes replaced)."""
        return self.body.decode(encoding, "replace")

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            ValueError: the body is not JSON.
        """
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self) -> str:
        return f"HttpResponse({self.status} {self.url}, {len(self.body)} bytes)"


def _decode_content(body: bytes, encoding: Optional[str]) -> bytes:
    import gzip
    import zlib

    name = (encoding or "").strip().lower()
    if not body or name in ("", "identity"):
        return body
    if name in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if name == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    return body  # an encoding this helper does not know: kept as received


def http_request(
    method: str,
    url: str,
    headers: Optional[Dict[str, str]] = None,
    data: Optional[bytes] = None,
    timeout_s: float = 30.0,
) -> HttpResponse:
    """Make one HTTP request whose raw body is recorded (and served again on replay).

    Tools that do their I/O through this helper get their raw HTTP body into the trace
    (``raw_io: true``): on reproduce the helper serves the recorded body instead of doing any
    I/O, so the tool's own parsing runs again. A gzip or deflate body is stored decoded, with
    the original encoding noted; an empty body records and replays as empty.

    Args:
        method: ``GET``, ``POST``, ...
        url: an ``http`` or ``https`` URL.
        headers: request headers.
        data: request body bytes.
        timeout_s: socket timeout in seconds.

    Returns:
        The response; HTTP error statuses are returned, not raised.

    Raises:
        OSError: the connection failed (``urllib.error.URLError`` and the like).
        ValueError: a URL that is not http(s).
        runner.errors.ReplayDivergence: in reproduce, a request the recording does not hold.
    """
    import urllib.error
    import urllib.request

    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"http_request needs an http(s) URL, not {url!r}")
    method = method.upper()
    source = HTTP_SOURCE.get()
    if source is not None:
        served = source(method, url)
        response = HttpResponse(
            int(served.get("status", 200)),
            dict(served.get("headers", {})),
            served.get("body", b""),
            url,
            served.get("content_encoding"),
        )
    else:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            url, data=data, headers=dict(headers or {}), method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as handle:  # noqa: S310
                status, raw_headers, raw = handle.status, handle.headers, handle.read()
        except urllib.error.HTTPError as exc:
            status, raw_headers, raw = exc.code, exc.headers, exc.read()
        encoding = raw_headers.get("Content-Encoding") if raw_headers is not None else None
        names = {k.lower(): v for k, v in (raw_headers.items() if raw_headers else [])}
        response = HttpResponse(
            status,
            names,
            _decode_content(raw, encoding),
            url,
            encoding.strip().lower() if encoding else None,
        )
    sink = HTTP_SINK.get()
    if sink is not None:
        sink.append(
            {
                "method": method,
                "url": url,
                "status": response.status,
                "content_type": response.headers.get("content-type"),
                "content_encoding": response.content_encoding,
                "body": response.body,
            }
        )
    return response


def http_get(
    url: str, headers: Optional[Dict[str, str]] = None, timeout_s: float = 30.0
) -> HttpResponse:
    """``http_request("GET", url, ...)``; see `http_request`."""
    return http_request("GET", url, headers=headers, timeout_s=timeout_s)
