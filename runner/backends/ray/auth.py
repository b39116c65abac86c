"""Does the Ray cluster authenticate its clients? Asked from outside Ray's own client.

A Ray cluster without authentication runs the code of anyone who reaches its GCS port: such a
client joins as a node or a driver and runs tasks on every node, the driver's machine
included. Ray's answer is token authentication (Ray >= 2.52: ``RAY_AUTH_MODE=
token`` with the token in ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``
on every node and driver; https://docs.ray.io/en/latest/ray-security/token-auth.html) or
mutual TLS (``RAY_USE_TLS=1``, ``RAY_TLS_SERVER_CERT``/``KEY``, ``RAY_TLS_CA_CERT``).

What the driver's own settings say proves nothing: a client that sends a token is answered by
a cluster that checks none. So the check is a measurement: a gRPC call that carries no token
(and, under TLS, no client certificate) to the GCS and to every node's raylet. A cluster
authenticates when every one of them refuses it: ``UNAUTHENTICATED`` (token mode), or a TLS
handshake that fails without a client certificate while the same call with the driver's
certificate is answered (mutual TLS). An endpoint that answers the call is open; anything else
(no answer at all) is not counted as authenticated: fail closed.

The calls are read-only and carry an empty request: ``NodeInfoGcsService/GetClusterId`` on the
GCS, ``NodeManagerService/GetSystemConfig`` on a raylet (method paths of Ray's protocol,
``src/ray/protobuf``; an unknown method answers ``UNIMPLEMENTED``, counted as not proven).

`probe_cluster` asks from a child process (``python -m runner.backends.ray.auth``, the
question on its stdin, the answers as JSON on its stdout): grpc's threads and its fork
handlers never enter the driver, which forks children of its own (a forked child of a process
that had used grpc aborted in grpc's poller, measured in the test suite).

May import: grpc (a dependency of the ``ray`` extra, imported by `probe` only), `runner.errors`
and the standard library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runner.errors import InfrastructureError

GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
RAYLET_METHOD = "/ray.rpc.NodeManagerService/GetSystemConfig"
PROBE_TIMEOUT_S = 10.0
UNSAFE_FLAG = "--unsafe-open-cluster"
AUTH_FIX = (
    "start every node and the driver with RAY_AUTH_MODE=token and the same RAY_AUTH_TOKEN"
    " (README, 'Many machines'), or mutual TLS; " + UNSAFE_FLAG + " runs on an open cluster"
    " anyway (anyone who reaches it runs code on every node)"
)


@dataclass(frozen=True)
class Endpoint:
    """One gRPC server of the cluster: what it is, where, and how it answered.

    Attributes:
        name: ``gcs`` or ``raylet <node id>``.
        target: ``host:port``.
        answer: ``refused`` (it authenticates), ``open`` (it answered a client without
            credentials) or ``unknown`` (no answer that proves either), with ``detail``.
        how: ``token`` or ``mtls`` when refused, else empty.
        detail: the gRPC status and message, for the report.
    """

    name: str
    target: str
    answer: str
    how: str
    detail: str


@dataclass(frozen=True)
class Verdict:
    """The cluster's answer to clients without credentials.

    Attributes:
        endpoints: every endpoint asked, in order.
    """

    endpoints: tuple[Endpoint, ...]

    @property
    def authenticated(self) -> bool:
        """True when every endpoint refused the client without credentials."""
        return bool(self.endpoints) and all(e.answer == "refused" for e in self.endpoints)

    @property
    def how(self) -> str:
        """``token``, ``mtls``, ``token+mtls`` when authenticated, else ``none``."""
        if not self.authenticated:
            return "none"
        return "+".join(sorted({e.how for e in self.endpoints}))

    def describe(self) -> str:
        """One line for ``doctor`` and errors: what refused or answered, by endpoint."""
        if self.authenticated:
            names = ", ".join(e.name for e in self.endpoints)
            return f"clients without credentials are refused ({self.how}) by {names}"
        bad = [e for e in self.endpoints if e.answer != "refused"]
        return "; ".join(f"{e.name} at {e.target}: {e.answer} ({e.detail})" for e in bad)


@dataclass(frozen=True)
class _Tls:
    ca: bytes
    cert: bytes | None
    key: bytes | None


def _tls(environ: Mapping[str, str]) -> _Tls | None:
    """The driver's TLS files when ``RAY_USE_TLS`` is on (Ray's variables), else None.

    Raises:
        InfrastructureError: TLS is on but a file named by a variable cannot be read.
    """
    if environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
        return None

    def read(name: str) -> bytes | None:
        path = environ.get(name)
        if not path:
            return None
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise InfrastructureError(f"RAY_USE_TLS is on but {name} is unreadable: {exc}") from exc

    ca = read("RAY_TLS_CA_CERT")
    if ca is None:
        raise InfrastructureError("RAY_USE_TLS is on but RAY_TLS_CA_CERT names no file")
    return _Tls(ca, read("RAY_TLS_SERVER_CERT"), read("RAY_TLS_SERVER_KEY"))


def _call(target: str, method: str, timeout_s: float, credentials: Any) -> tuple[Any, str]:
    """One unary call with an empty request and no metadata; its status code and message."""
    import grpc  # here only: in the probe's own process (module docstring)

    if credentials is None:
        channel = grpc.insecure_channel(target)
    else:
        channel = grpc.secure_channel(target, credentials)
    with channel:
        call = channel.unary_unary(
            method, request_serializer=lambda _: b"", response_deserializer=lambda b: b
        )
        try:
            call(None, timeout=timeout_s, wait_for_ready=False)
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
            details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
            return code, str(details or "")[:300]
    return grpc.StatusCode.OK, "answered"


def probe(
    name: str,
    target: str,
    method: str,
    *,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> Endpoint:
    """Ask one endpoint with no token (and no client certificate) and classify its answer.

    Args:
        name: how the endpoint is named in reports (``gcs``, ``raylet <node>``).
        target: ``host:port``.
        method: the gRPC method path to call (`GCS_METHOD`, `RAYLET_METHOD`).
        environ: the driver's environment, for Ray's TLS variables (default ``os.environ``).
        timeout_s: seconds for each call.

    Returns:
        The `Endpoint` with its answer.

    Raises:
        InfrastructureError: TLS is on and its files are unreadable.
    """
    import grpc  # here only: in the probe's own process (module docstring)

    tls = _tls(os.environ if environ is None else environ)
    if tls is None:
        code, detail = _call(target, method, timeout_s, None)
        if code is grpc.StatusCode.UNAUTHENTICATED:
            return Endpoint(name, target, "refused", "token", f"{code.name}: {detail}")
        answer = "open" if code is grpc.StatusCode.OK else "unknown"
        return Endpoint(name, target, answer, "", f"{code.name}: {detail}")
    bare = grpc.ssl_channel_credentials(root_certificates=tls.ca)
    code, detail = _call(target, method, timeout_s, bare)
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return Endpoint(name, target, "refused", "token", f"{code.name}: {detail}")
    if code is grpc.StatusCode.OK:
        return Endpoint(name, target, "open", "", "answered a TLS client without certificate")
    if tls.cert is None or tls.key is None:
        return Endpoint(name, target, "unknown", "", f"{code.name}: {detail} (no client cert)")
    full = grpc.ssl_channel_credentials(tls.ca, private_key=tls.key, certificate_chain=tls.cert)
    with_cert, cert_detail = _call(target, method, timeout_s, full)
    if with_cert in (grpc.StatusCode.OK, grpc.StatusCode.UNAUTHENTICATED):
        how = "mtls" if with_cert is grpc.StatusCode.OK else "token"
        return Endpoint(name, target, "refused", how, f"without certificate {code.name}: {detail}")
    return Endpoint(name, target, "unknown", "", f"{with_cert.name}: {cert_detail}")


# The driver's variables the probe reads (Ray's TLS files); nothing else reaches its child.
_TLS_VARIABLES = ("RAY_USE_TLS", "RAY_TLS_CA_CERT", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY")
_ANSWERS = ("refused", "open", "unknown")


def probe_cluster(
    gcs: str,
    raylets: Iterable[tuple[str, str]] = (),
    *,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> Verdict:
    """Ask the GCS and each raylet whether it answers a client without credentials.

    The calls are made by a child process (module docstring), one endpoint after another.

    Args:
        gcs: the cluster's address (``host:port`` of the GCS).
        raylets: ``(node id, host:port)`` of each node's raylet (``NodeManagerAddress`` and
            ``NodeManagerPort`` of ``ray.nodes()``); none before the driver has joined.
        environ: the driver's environment, for Ray's TLS variables (default ``os.environ``).
        timeout_s: seconds for each call.

    Returns:
        The `Verdict` over every endpoint asked.

    Raises:
        InfrastructureError: TLS is on and its files are unreadable, or the probe's process
            failed or answered something else than its answers.
    """
    env = os.environ if environ is None else environ
    asked = [("gcs", gcs, GCS_METHOD)]
    asked += [(f"raylet {node[:12]}", target, RAYLET_METHOD) for node, target in raylets]
    question = {
        "endpoints": asked,
        "environ": {k: env[k] for k in _TLS_VARIABLES if k in env},
        "timeout_s": timeout_s,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__],
            input=json.dumps(question),
            capture_output=True,
            text=True,
            timeout=timeout_s * len(asked) * 3 + 30,
            env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "HOME")},
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise InfrastructureError(f"the cluster's authentication probe did not run: {exc}") from exc
    try:
        answer = json.loads(done.stdout)
        if "error" in answer:
            raise InfrastructureError(str(answer["error"]))
        found = tuple(Endpoint(**e) for e in answer["endpoints"])
        if [(e.name, e.target) for e in found] != [(n, t) for n, t, _ in asked] or any(
            e.answer not in _ANSWERS for e in found
        ):
            raise ValueError("answers do not match the question")
    except (ValueError, TypeError, KeyError) as exc:
        raise InfrastructureError(
            f"the cluster's authentication probe failed (exit {done.returncode}):"
            f" {done.stderr.strip()[-500:]}"
        ) from exc
    return Verdict(found)


def _main() -> None:
    """The probe's process: the question as JSON on stdin, the answers as JSON on stdout."""
    question = json.loads(sys.stdin.read())
    try:
        found = [
            probe(str(name), str(target), str(method), environ=question["environ"],
                  timeout_s=float(question["timeout_s"]))
            for name, target, method in question["endpoints"]
        ]  # fmt: skip
    except InfrastructureError as exc:
        print(json.dumps({"error": str(exc)}))
        return
    print(json.dumps({"endpoints": [asdict(e) for e in found]}))


class ClusterNotAuthenticated(InfrastructureError):
    """The Ray cluster answers clients without credentials and no unsafe opt-in was given.

    Attributes:
        verdict: what each endpoint answered.
    """

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(
            f"the Ray cluster does not authenticate its clients: {verdict.describe()}. Fix:"
            f" {AUTH_FIX}",
            fix=AUTH_FIX,
        )
        self.verdict = verdict


def require_authenticated(verdict: Verdict, *, allow_open: bool) -> None:
    """Refuse an open cluster unless ``allow_open`` (the ``--unsafe-open-cluster`` flag).

    Raises:
        ClusterNotAuthenticated: some endpoint answered a client without credentials or gave
            no answer that proves it authenticates, and ``allow_open`` is False (exit 6).
    """
    if verdict.authenticated or allow_open:
        return
    raise ClusterNotAuthenticated(verdict)


__all__ = [
    "AUTH_FIX",
    "GCS_METHOD",
    "RAYLET_METHOD",
    "UNSAFE_FLAG",
    "ClusterNotAuthenticated",
    "Endpoint",
    "Verdict",
    "probe",
    "probe_cluster",
    "require_authenticated",
]


if __name__ == "__main__":
    _main()
