"""The cluster-authentication probe (runner/backends/ray/auth.py) against real gRPC servers on
loopback that answer as Ray's do (tests/unit/backends/_grpc_server.py, a process of its own): a
token-mode server refuses the call ``UNAUTHENTICATED``, an open one answers it, a missing method
or a closed port proves nothing (fail closed), TLS counts only when a client without a
certificate is refused. grpc never loads into this process (it forks later tests)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runner.backends.ray import auth
from runner.errors import InfrastructureError

SERVER = Path(__file__).with_name("_grpc_server.py")


class Server:
    """A running `_grpc_server.py`: its address and the calls it saw (after `stop`)."""

    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc, self.target = proc, f"127.0.0.1:{port}"
        self.seen: list[dict[str, Any]] = []

    def stop(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.seen = [json.loads(line) for line in self.proc.stdout.read().splitlines()]
        self.proc.wait(timeout=30)


@contextmanager
def server(mode: str, *tls: str) -> Iterator[Server]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), mode, *tls],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    running = Server(proc, int(proc.stdout.readline()))
    try:
        yield running
    finally:
        if proc.poll() is None:
            running.stop()


def test_a_token_server_is_refused_and_the_probe_sent_no_credentials() -> None:
    with server("token") as srv:
        verdict = auth.probe_cluster(srv.target, [("n" * 56, srv.target)], environ={})
        srv.stop()
    assert verdict.authenticated and verdict.how == "token", verdict.describe()
    assert [e.answer for e in verdict.endpoints] == ["refused", "refused"]
    assert [c["method"] for c in srv.seen] == [auth.GCS_METHOD, auth.RAYLET_METHOD]
    assert all("authorization" not in c["metadata"] for c in srv.seen)
    auth.require_authenticated(verdict, allow_open=False)  # no exception


def test_an_open_server_is_refused_unless_the_unsafe_opt_in() -> None:
    with server("open") as srv:
        verdict = auth.probe_cluster(srv.target, environ={})
    assert not verdict.authenticated and verdict.how == "none"
    assert verdict.endpoints[0].answer == "open"
    with pytest.raises(auth.ClusterNotAuthenticated) as caught:
        auth.require_authenticated(verdict, allow_open=False)
    assert "--unsafe-open-cluster" in str(caught.value) and srv.target in str(caught.value)
    assert caught.value.exit_code == 6
    auth.require_authenticated(verdict, allow_open=True)


def test_one_open_raylet_makes_the_cluster_open() -> None:
    with server("token") as gcs, server("open") as raylet:
        verdict = auth.probe_cluster(gcs.target, [("a" * 56, raylet.target)], environ={})
    assert [e.answer for e in verdict.endpoints] == ["refused", "open"]
    assert not verdict.authenticated
    assert f"raylet {'a' * 12}" in verdict.describe()


def test_no_answer_is_not_authentication() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        verdict = auth.probe_cluster(f"127.0.0.1:{port}", environ={}, timeout_s=2.0)
    assert verdict.endpoints[0].answer == "unknown" and not verdict.authenticated


def test_an_unknown_method_proves_nothing() -> None:
    with server("open") as srv:
        question = {
            "endpoints": [["gcs", srv.target, "/ray.rpc.NodeInfoGcsService/Nope"]],
            "environ": {},
            "timeout_s": 5,
        }
        done = subprocess.run(
            [sys.executable, "-m", "runner.backends.ray.auth"],
            input=json.dumps(question),
            capture_output=True,
            text=True,
            check=True,
        )
    (endpoint,) = json.loads(done.stdout)["endpoints"]
    assert endpoint["answer"] == "unknown" and "UNIMPLEMENTED" in endpoint["detail"]


def test_tls_on_without_a_ca_file_is_an_error() -> None:
    with pytest.raises(InfrastructureError, match="RAY_TLS_CA_CERT"):
        auth.probe_cluster("127.0.0.1:1", environ={"RAY_USE_TLS": "1"})


def _certs(folder: Path) -> dict[str, Path]:
    """A CA and a certificate for 127.0.0.1 signed by it (openssl), as Ray's TLS files."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    names = ("ca.key", "ca.crt", "s.key", "s.csr", "s.crt")
    ca_key, ca, key, csr, cert = (folder / n for n in names)

    def run(*args: str) -> None:
        subprocess.run(args, check=True, capture_output=True, timeout=60)

    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
        "-out", str(ca), "-days", "1", "-subj", "/CN=test-ca")  # fmt: skip
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=127.0.0.1")  # fmt: skip
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "1", "-extfile", str(ext))  # fmt: skip
    return {"ca": ca, "key": key, "cert": cert}


@pytest.mark.parametrize("require_client_cert", [True, False])
def test_mutual_tls_counts_only_when_a_client_without_a_certificate_is_refused(
    tmp_path: Path, require_client_cert: bool
) -> None:
    files = _certs(tmp_path)
    environ = {
        "RAY_USE_TLS": "1",
        "RAY_TLS_CA_CERT": str(files["ca"]),
        "RAY_TLS_SERVER_CERT": str(files["cert"]),
        "RAY_TLS_SERVER_KEY": str(files["key"]),
    }
    tls = (str(files["ca"]), str(files["cert"]), str(files["key"]), str(int(require_client_cert)))
    with server("open", *tls) as srv:
        verdict = auth.probe_cluster(srv.target, environ=environ, timeout_s=5.0)
    if require_client_cert:
        assert verdict.authenticated and verdict.how == "mtls", verdict.describe()
    else:  # TLS that anyone may speak authenticates nobody
        assert verdict.endpoints[0].answer == "open" and not verdict.authenticated


def test_the_probe_never_loads_grpc_into_the_asking_process() -> None:
    with server("open") as srv:
        auth.probe_cluster(srv.target, environ={})
    assert "grpc" not in sys.modules
