"""A gRPC server on loopback that answers as Ray's GCS and raylet do, run as its own process.

``python _grpc_server.py MODE [CA CERT KEY REQUIRE]``: MODE ``token`` refuses a call without
``authorization: Bearer s3cret`` with ``UNAUTHENTICATED`` (Ray's token mode), ``open`` answers
every call; with TLS files it listens over TLS (REQUIRE ``1``: a client certificate is needed).
It prints its port, then one JSON line per call (method and metadata), and stops when its
stdin closes. Its own process: grpc's threads stay out of the test process, which forks.
"""

from __future__ import annotations

import json
import sys
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

METHODS = (
    "/ray.rpc.NodeInfoGcsService/GetClusterId",
    "/ray.rpc.NodeManagerService/GetSystemConfig",
)


class _Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def service(self, details: Any) -> Any:
        if details.method not in METHODS:
            return None  # UNIMPLEMENTED

        def answer(request: bytes, context: Any) -> bytes:
            metadata = {k: str(v) for k, v in context.invocation_metadata()}
            print(json.dumps({"method": details.method, "metadata": metadata}), flush=True)
            if self.mode == "token" and metadata.get("authorization") != "Bearer s3cret":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken")
            return b""

        return grpc.unary_unary_rpc_method_handler(
            answer, request_deserializer=lambda b: b, response_serializer=lambda b: b
        )


def main() -> None:
    mode, tls = sys.argv[1], sys.argv[2:]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[_Handler(mode)])
    if tls:
        ca, cert, key, require = tls
        credentials = grpc.ssl_server_credentials(
            [(Path(key).read_bytes(), Path(cert).read_bytes())],
            root_certificates=Path(ca).read_bytes(),
            require_client_auth=require == "1",
        )
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(None)


if __name__ == "__main__":
    main()
