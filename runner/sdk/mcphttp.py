"""A workflow's MCP server URLs: which they are, which request is one's, its event streams.

Standard library only, Python 3.9+. Shared by the three places that handle the MCP
Streamable HTTP transport (MCP specification 2025-06-18, "Transports"): the sandbox's route and
endpoint (`runner.runtime.mcproute`, `runner.runtime.mcphttp`), the host's forwarder in
``record`` (`runner.providers.mcphttp`) and, in a user's own process, `runner.sdk.record`
(`runner.sdk.mcphttprecord`).

- `url_servers`: the ``tools: [{mcp: {url: ..., prefix: ...}}]`` entries of a workflow, each
  ``{label: "tools[i]", prefix, url}`` (the label is how the trace names the server, ``meta.
  mcp.server``, as for a stdio server);
- `endpoint_key` / `server_of`: one endpoint is one scheme, host, port and path (a trailing
  slash, the default port and the host's case make no difference; the query is not part of
  it): the URL a client posts to is its server's when their keys are equal;
- `answers`: whether a message is the response to a request (by its ``id``);
- `sse_messages`: the JSON ``data`` of each event of a ``text/event-stream`` answer (W3C
  "Server-sent events", interpreting an event stream), bounded.
"""

import contextlib
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple
from urllib.parse import urlsplit

from runner.sdk.mcpcalls import mcp_entries
from runner.trace.strictjson import loads as strict_loads

__all__ = [
    "MAX_STREAM_BYTES",
    "EndpointKey",
    "SseReader",
    "StreamTooLarge",
    "answers",
    "endpoint_key",
    "server_of",
    "sse_messages",
    "url_servers",
]

MAX_STREAM_BYTES = 16 << 20
"""Bytes of one answer read for its messages (the runtime's bound for one MCP message)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}

EndpointKey = Tuple[str, str, int, str]  # scheme, host, port, path


class StreamTooLarge(ValueError):
    """An event stream over `MAX_STREAM_BYTES`."""


def url_servers(workflow: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The MCP server URLs of a normalised workflow: ``{label, prefix, url}`` each."""
    found = []
    for label, mcp, prefix in mcp_entries(workflow):
        url = mcp.get("url")
        if isinstance(url, str) and url:
            found.append({"label": label, "prefix": prefix, "url": url})
    return found


def answers(message: Any, ident: Any) -> bool:
    """True when ``message`` is the JSON-RPC response (result or error) to request ``ident``."""
    return (
        isinstance(message, dict)
        and "method" not in message
        and message.get("id") == ident
        and ("result" in message) != ("error" in message)
    )


def endpoint_key(url: str) -> Optional[EndpointKey]:
    """How two URLs of one endpoint compare (see the module docstring); None: not http(s)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    path = parts.path.rstrip("/") or "/"
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme], path


def server_of(url: str, servers: Iterable[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The server of `url_servers` whose endpoint ``url`` is, or None."""
    key = endpoint_key(url)
    if key is None:
        return None
    for server in servers:
        if endpoint_key(str(server.get("url"))) == key:
            return server
    return None


class SseReader:
    """Reads an event stream as it arrives: `feed` each chunk, get the events' JSON ``data``.

    ``data`` lines are joined by newlines, an event ends at an empty line; an event whose data
    is not JSON (a keep-alive comment has none) is skipped.

    Args:
        limit: the most bytes read (`feed` raises `StreamTooLarge` past it).

    Linear in the bytes fed: a chunk without a line end is appended, and a chunk with one
    leaves only its own tail behind (a long line trickled in small chunks was split again at
    every chunk: 16 MiB in 4 KiB chunks took 44 s of the agent's CPU, found in review).
    """

    def __init__(self, limit: int = MAX_STREAM_BYTES) -> None:
        self.limit = limit
        self.read = 0
        self._buffer = bytearray()  # the line not ended yet
        self._data: List[bytes] = []

    def feed(self, chunk: bytes) -> List[Any]:
        """The messages the events completed by ``chunk`` hold, in order.

        Raises:
            StreamTooLarge: more than ``limit`` bytes fed.
        """
        self.read += len(chunk)
        if self.read > self.limit:
            raise StreamTooLarge("an event stream over {} bytes".format(self.limit))
        if b"\n" not in chunk and b"\r" not in chunk:
            self._buffer += chunk  # linear: a long line in small chunks is never split again
            return []
        lines = (bytes(self._buffer) + chunk).splitlines(keepends=True)
        complete = bool(lines) and lines[-1].endswith((b"\n", b"\r"))
        self._buffer = bytearray() if complete or not lines else bytearray(lines.pop())
        found = []
        for line in lines:
            line = line.rstrip(b"\r\n")
            if line:
                name, _, value = line.partition(b":")
                if name == b"data":
                    self._data.append(value[1:] if value.startswith(b" ") else value)
                continue
            if self._data:
                with contextlib.suppress(ValueError, UnicodeDecodeError):
                    found.append(strict_loads(b"\n".join(self._data)))
                self._data = []
        return found


def sse_messages(chunks: Iterable[bytes], limit: int = MAX_STREAM_BYTES) -> Iterator[Any]:
    """The JSON ``data`` of each event of an event stream, as the chunks arrive (`SseReader`).

    Raises:
        StreamTooLarge: more than ``limit`` bytes.
    """
    reader = SseReader(limit)
    for chunk in chunks:
        yield from reader.feed(chunk)
