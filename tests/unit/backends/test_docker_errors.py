"""Translation of docker SDK / requests exceptions at the one boundary (no Docker needed)."""

from __future__ import annotations

import docker.errors
import pytest
import requests
import urllib3.exceptions

from runner.backends.docker.client import connect, retrying, translate
from runner.errors import InfrastructureError, TransientInfrastructureError


def api_error(status: int, message: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(str(status), response=response, explanation=message)


def test_engine_unreachable_is_one_line_naming_address_and_fix() -> None:
    exc = requests.exceptions.ConnectionError(
        urllib3.exceptions.ProtocolError(
            "Connection aborted.", FileNotFoundError(2, "No such file or directory")
        )
    )
    err = translate(exc, "ping", "unix:///nonexistent.sock")
    assert type(err) is InfrastructureError and err.exit_code == 6
    text = str(err)
    assert "\n" not in text
    assert "unix:///nonexistent.sock" in text and "No such file or directory" in text
    assert "fix:" in text


def test_connect_to_a_missing_socket_fails_cleanly() -> None:
    with pytest.raises(InfrastructureError, match=r"not reachable at unix:///nonexistent\.sock"):
        connect("unix:///nonexistent.sock")


@pytest.mark.parametrize(
    ("status", "message", "transient"),
    [
        (503, "service unavailable", True),
        (500, "context deadline exceeded: timeout", True),
        (409, "removal of container abc is already in progress", True),
        (409, 'Conflict. The container name "/x" is already in use', False),
        (500, "OCI runtime create failed: exec: no such file or directory", False),
        (400, "invalid mount config", False),
    ],
)
def test_only_transient_engine_answers_are_retryable(
    status: int, message: str, transient: bool
) -> None:
    err = translate(api_error(status, message), "act")
    assert isinstance(err, InfrastructureError)
    assert isinstance(err, TransientInfrastructureError) is transient
    assert err.fields["status"] == status and message in str(err)


def test_missing_image_names_the_fix() -> None:
    response = requests.Response()
    response.status_code = 404
    exc = docker.errors.ImageNotFound("404", response=response, explanation="No such image: x")
    err = translate(exc, "create container c")
    assert "sandbox-replay image build --offline" in str(err) and err.fields["status"] == 404


def test_retrying_retries_transient_and_stops_at_permanent() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise api_error(503, "try again")
        return "done"

    assert retrying("flaky", flaky) == "done" and len(calls) == 3

    permanent_calls: list[int] = []

    def broken() -> None:
        permanent_calls.append(1)
        raise api_error(400, "bad request")

    with pytest.raises(InfrastructureError, match="bad request"):
        retrying("broken", broken)
    assert len(permanent_calls) == 1


def test_retrying_gives_up_after_its_attempts() -> None:
    calls: list[int] = []

    def always_busy() -> None:
        calls.append(1)
        raise api_error(503, "busy")

    with pytest.raises(TransientInfrastructureError):
        retrying("busy", always_busy, attempts=2)
    assert len(calls) == 2
