"""The cluster-authentication probe (runner/backends/ray/auth.py) against real gRPC servers on
loopback that answer as Ray's do: a token-mode server refuses the call ``UNAUTHENTICATED``, an
open one answers it, a missing method or a closed port proves nothing (fail closed)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from runner.backends.ray import auth
from runner.errors import InfrastructureError


class _Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.seen: list[tuple[str, dict[str, str]]] = []

    def service(self, details: Any) -> Any:
        if details.method not in (auth.GCS_METHOD, auth.RAYLET_METHOD):
            return None  # UNIMPLEMENTED

        def answer(request: bytes, context: Any) -> bytes:
            metadata = {k: str(v) for k, v in context.invocation_metadata()}
            self.seen.append((details.method, metadata))
            if self.mode == "token" and metadata.get("authorization") != "Bearer s3cret":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "InvalidAuthToken")
            return b""

        return grpc.unary_unary_rpc_method_handler(
            answer, request_deserializer=lambda b: b, response_serializer=lambda b: b
        )


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, _Handler]]:
    handler = _Handler(request.param)
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        yield f"127.0.0.1:{port}", handler
    finally:
        srv.stop(None)


@pytest.mark.parametrize("server", ["token"], indirect=True)
def test_a_token_server_is_refused_and_the_probe_sent_no_credentials(
    server: tuple[str, _Handler],
) -> None:
    target, handler = server
    verdict = auth.probe_cluster(target, [("n" * 56, target)], environ={})
    assert verdict.authenticated and verdict.how == "token"
    assert [e.answer for e in verdict.endpoints] == ["refused", "refused"]
    assert [m for m, _ in handler.seen] == [auth.GCS_METHOD, auth.RAYLET_METHOD]
    assert all("authorization" not in md for _, md in handler.seen)
    auth.require_authenticated(verdict, allow_open=False)  # no exception


@pytest.mark.parametrize("server", ["open"], indirect=True)
def test_an_open_server_is_refused_unless_the_unsafe_opt_in(
    server: tuple[str, _Handler],
) -> None:
    target, _ = server
    verdict = auth.probe_cluster(target, environ={})
    assert not verdict.authenticated and verdict.how == "none"
    assert verdict.endpoints[0].answer == "open"
    with pytest.raises(auth.ClusterNotAuthenticated) as caught:
        auth.require_authenticated(verdict, allow_open=False)
    assert "--unsafe-open-cluster" in str(caught.value) and target in str(caught.value)
    assert caught.value.exit_code == 6
    auth.require_authenticated(verdict, allow_open=True)


@pytest.mark.parametrize("server", ["token"], indirect=True)
def test_one_open_raylet_makes_the_cluster_open(server: tuple[str, _Handler]) -> None:
    target, _ = server
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=1), handlers=[_Handler("open")])
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        verdict = auth.probe_cluster(target, [("a" * 56, f"127.0.0.1:{port}")], environ={})
    finally:
        srv.stop(None)
    assert [e.answer for e in verdict.endpoints] == ["refused", "open"]
    assert not verdict.authenticated
    assert f"raylet {'a' * 12}" in verdict.describe()


def test_no_answer_is_not_authentication() -> None:
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = srv.add_insecure_port("127.0.0.1:0")  # bound, then closed: nobody listens
    srv.stop(None)
    verdict = auth.probe_cluster(f"127.0.0.1:{port}", environ={}, timeout_s=2.0)
    assert verdict.endpoints[0].answer == "unknown" and not verdict.authenticated


@pytest.mark.parametrize("server", ["open"], indirect=True)
def test_an_unknown_method_proves_nothing(server: tuple[str, _Handler]) -> None:
    target, _ = server
    endpoint = auth.probe("gcs", target, "/ray.rpc.NodeInfoGcsService/Nope", environ={})
    assert endpoint.answer == "unknown" and "UNIMPLEMENTED" in endpoint.detail


def test_tls_on_without_a_ca_file_is_an_error() -> None:
    with pytest.raises(InfrastructureError, match="RAY_TLS_CA_CERT"):
        auth.probe("gcs", "127.0.0.1:1", auth.GCS_METHOD, environ={"RAY_USE_TLS": "1"})


def _certs(folder: Any) -> dict[str, Any]:
    """A CA and a certificate for 127.0.0.1 signed by it (openssl), as Ray's TLS files."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.crt", "s.key", "s.csr", "s.crt")
    )
    run = lambda *a: subprocess.run(a, check=True, capture_output=True, timeout=60)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
        "-out", str(ca), "-days", "1", "-subj", "/CN=test-ca")  # fmt: skip
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")  # fmt: skip
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "1", "-extfile", str(ext))  # fmt: skip
    return {"ca": ca, "key": key, "cert": cert}


@pytest.mark.parametrize("require_client_cert", [True, False])
def test_mutual_tls_counts_only_when_a_client_without_a_certificate_is_refused(
    tmp_path: Any, require_client_cert: bool
) -> None:
    files = _certs(tmp_path)
    credentials = grpc.ssl_server_credentials(
        [(files["key"].read_bytes(), files["cert"].read_bytes())],
        root_certificates=files["ca"].read_bytes(),
        require_client_auth=require_client_cert,
    )
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[_Handler("open")])
    port = srv.add_secure_port("127.0.0.1:0", credentials)
    srv.start()
    environ = {
        "RAY_USE_TLS": "1",
        "RAY_TLS_CA_CERT": str(files["ca"]),
        "RAY_TLS_SERVER_CERT": str(files["cert"]),
        "RAY_TLS_SERVER_KEY": str(files["key"]),
    }
    try:
        verdict = auth.probe_cluster(f"127.0.0.1:{port}", environ=environ, timeout_s=5.0)
    finally:
        srv.stop(None)
    if require_client_cert:
        assert verdict.authenticated and verdict.how == "mtls", verdict.describe()
    else:  # TLS that anyone may speak authenticates nobody
        assert verdict.endpoints[0].answer == "open" and not verdict.authenticated
