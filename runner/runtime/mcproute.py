"""Route an agent's requests to the workflow's MCP server URLs to the runtime. Standard library.

Standard library only, Python 3.9+. Runs in the program's process (the worker,
`runner.runtime.worker.process`), before the program is imported, when the workflow names a
Streamable HTTP server (``tools: [{mcp: {url: ...}}]``). The sandbox has no network: the
agent's MCP client would fail to connect. `install` patches the default transports of the HTTP
libraries the Python MCP clients are built on (``httpx2``, which the ``mcp`` package and so the
OpenAI Agents SDK's ``MCPServerStreamableHttp`` use since mcp 2, and ``httpx``, what earlier
versions and other clients use): ``HTTPTransport.handle_request`` and
``AsyncHTTPTransport.handle_async_request``. A request whose URL is a declared server's
(`target`: the same endpoint, `runner.sdk.mcphttp.endpoint_key`; the query is kept) is
sent, as plain HTTP, to the model gateway's loopback port at that server's route
(`runner.runtime.mcphttp.route_of`), whose endpoint speaks the transport; every other
request goes out as before (and fails, with its attempt in the outbound log).

Why the transport and not the ``mcp`` package's client: one patch of the one method every
request of a client on these libraries goes through covers the ``mcp`` package of any
version, any SDK wrapping it (the Agents SDK, LangChain's adapters) and a client of one's
own, and sees the HTTP exchange the endpoint answers, so the hub decides on the very JSON-RPC
messages the client sent; patching ``ClientSession`` would tie the runtime to one package's
internals. Why not the network (a DNS name or an address of the server's pointed at a
loopback listener): an ``https`` URL would need a certificate the client trusts for the
server's name, which only a CA planted in the sandbox could give. What is not covered: a
client on another library (``aiohttp``, ``requests``), a transport a program builds itself
on no default transport, a proxy the program configures in code for that URL; their
attempts fail like any connection in a sandbox, and the outbound log names them.

The libraries are imported here by name, only when installed and only when the workflow names
a URL (the runtime imports nothing outside the standard library otherwise).
"""

import importlib
import importlib.util
import json
import os
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit

from runner.runtime.mcphttp import route_of
from runner.runtime.mcphub import ENV_SERVERS
from runner.sdk.mcphttp import EndpointKey, endpoint_key
from runner.wire.env import ENV_GATEWAY

__all__ = ["LIBRARIES", "install", "install_from_env", "routes_of", "target"]

LIBRARIES = ("httpx2", "httpx")
_state: Dict[str, Any] = {"routes": {}, "patched": set()}


def routes_of(servers: List[Dict[str, Any]], gateway: str) -> Dict[EndpointKey, str]:
    """Each declared URL's key → the gateway URL of its route (``http://HOST:PORT/...``).

    Args:
        servers: `runner.sdk.mcphttp.url_servers` (others, without a ``url``, are left out).
        gateway: ``host:port`` of the gateway.
    """
    routes: Dict[EndpointKey, str] = {}
    for server in servers:
        url, label = server.get("url"), str(server.get("label", ""))
        index = label[len("tools[") : -1] if label.startswith("tools[") else ""
        key = endpoint_key(url) if isinstance(url, str) else None
        if key is not None and index.isdigit() and key not in routes:
            routes[key] = "http://{}{}".format(gateway, route_of(int(index)))
    return routes


def target(url: str, routes: Dict[EndpointKey, str]) -> Optional[str]:
    """The gateway URL a request to ``url`` goes to instead (its query kept), or None."""
    key = endpoint_key(url)
    found = routes.get(key) if key is not None else None
    if found is None:
        return None
    query = urlsplit(url).query
    return found + ("?" + query if query else "")


def _rerouted(lib: Any, request: Any) -> Any:
    """``request`` sent to its server's route instead, or the request itself (not declared)."""
    routes = _state["routes"]
    found = target(str(request.url), routes) if routes else None
    if found is None:
        return request
    headers = lib.Headers(request.headers)
    headers["host"] = urlsplit(found).netloc
    return lib.Request(
        request.method,
        found,
        headers=headers,
        stream=request.stream,
        extensions=request.extensions,
    )


def _patch(lib: Any) -> None:
    sync_original = lib.HTTPTransport.handle_request
    async_original = lib.AsyncHTTPTransport.handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        return sync_original(self, _rerouted(lib, request))

    async def handle_async_request(self: Any, request: Any) -> Any:
        return await async_original(self, _rerouted(lib, request))

    handle_request.__wrapped__ = sync_original  # type: ignore[attr-defined]
    handle_async_request.__wrapped__ = async_original  # type: ignore[attr-defined]
    lib.HTTPTransport.handle_request = handle_request
    lib.AsyncHTTPTransport.handle_async_request = handle_async_request


def install(servers: List[Dict[str, Any]], gateway: str) -> List[str]:
    """Route the declared URLs of ``servers`` to ``gateway`` from now on; the libraries patched.

    Args:
        servers: `runner.sdk.mcphttp.url_servers` (others, without a ``url``, are left out).
        gateway: ``host:port`` of the gateway.
    """
    _state["routes"] = routes_of(servers, gateway)
    if not _state["routes"]:
        return []
    for name in LIBRARIES:
        if name in _state["patched"]:
            continue
        try:
            if importlib.util.find_spec(name) is None:
                continue
            lib = importlib.import_module(name)
            _patch(lib)
        except (ImportError, AttributeError, ValueError):
            continue  # not this library, or not one shaped like httpx: nothing routed
        _state["patched"].add(name)
    return sorted(_state["patched"])


def install_from_env() -> List[str]:
    """`install` the URL servers named in `ENV_SERVERS`, to the gateway of `ENV_GATEWAY`."""
    gateway = os.environ.get(ENV_GATEWAY, "")
    try:
        servers = json.loads(os.environ.get(ENV_SERVERS) or "[]")
    except ValueError:
        return []
    if not gateway or not isinstance(servers, list):
        return []
    return install([s for s in servers if isinstance(s, dict)], gateway)
