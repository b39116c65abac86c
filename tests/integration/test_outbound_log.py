"""Decoys cannot hide a real connect in the outbound log (real containers).

Every lookup and connect happens inside the ``network_mode=none`` sandbox: names under
``.invalid`` and the TEST-NET-1 address 192.0.2.1, which nothing there can reach (the attempt
fails at once; nothing leaves the machine). The log keeps distinct destinations with counts;
more distinct destinations than its cap make the coverage ``partial``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends.docker import DockerBackend
from tests.integration._episodes import Outcome, Project

pytestmark = pytest.mark.docker

CAP = 1000  # runner.wire.destinations.MAX_DESTINATIONS, stated here so that a change is seen

TOOLS = """
import socket, subprocess, sys
from runner.sdk import Effect, tool

DECOYS = '''
import socket, sys
n, distinct = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    try:
        socket.getaddrinfo("decoy-%d.invalid" % (i % distinct), 443)
    except OSError:
        pass
s = socket.socket()
try:
    s.connect(("192.0.2.1", 8443))  # the real attempt, after the flood
except OSError:
    pass
'''


@tool("net.decoys", effect=Effect.LOCAL)
def decoys(n: int, distinct: int, child: bool = False) -> str:
    if child:
        done = subprocess.run([sys.executable, "-c", DECOYS, str(n), str(distinct)])
        return "child exited %d" % done.returncode
    exec(DECOYS.replace("int(sys.argv[1]), int(sys.argv[2])", "%d, %d" % (n, distinct)))
    return "done"
"""


@pytest.fixture(scope="module")
def backend(docker_client: Any) -> Iterator[DockerBackend]:
    b = DockerBackend.connect(session_id=f"outbound-{uuid.uuid4().hex[:10]}")
    yield b
    b.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("outbound") / "proj", TOOLS, module="decoy_tools")


def _run(
    project: Project, backend: Any, image: str, tmp_path: Path, n: int, distinct: int, child: bool
) -> Outcome:
    flag = "true" if child else "false"
    workflow = project.workflow(
        f"- {{id: d, tool: net.decoys, args: {{n: {n}, distinct: {distinct}, child: {flag}}}}}\n"
    )
    out = project.run(backend, image, workflow, state_dir=tmp_path / "state", timeout_s=120)
    assert out.result.status == "succeeded", out.end
    return out


def _connects(out: Outcome) -> list[dict[str, Any]]:
    """Connects to the real destination (the egress witness also logs the resolver's, port 53)."""
    return [a for a in out.end["outbound"] if a["kind"] == "connect" and a["port"] != 53]


@pytest.mark.parametrize("child", [False, True], ids=["runtime", "python-child"])
def test_a_connect_after_1500_decoy_lookups_is_in_the_log(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, child: bool
) -> None:
    out = _run(project, backend, sandbox_image, tmp_path, n=1500, distinct=3, child=child)
    (connect,) = _connects(out)
    assert (connect["address"], connect["port"], connect["count"]) == ("192.0.2.1", 8443, 1)
    lookups = [a for a in out.end["outbound"] if a["kind"] == "dns"]
    assert sorted(a["host"] for a in lookups) == [f"decoy-{i}.invalid" for i in range(3)]
    assert sum(a["count"] for a in lookups) == 1500  # every attempt counted, none dropped
    assert out.end["outbound_dropped"] == 0 and out.end["coverage"] == "full", out.end


@pytest.mark.parametrize("child", [False, True], ids=["runtime", "python-child"])
def test_more_distinct_decoys_than_the_cap_make_the_coverage_partial(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path, child: bool
) -> None:
    out = _run(
        project, backend, sandbox_image, tmp_path, n=CAP + 50, distinct=CAP + 50, child=child
    )
    assert len(out.end["outbound"]) == CAP  # the cap on distinct destinations
    # 50 lookups and the connect, counted; the resolver's connects (seen by the egress witness,
    # a destination of their own) are kept or dropped, depending on when they arrive
    assert out.end["outbound_dropped"] >= 51, out.end["outbound_dropped"]
    assert out.end["coverage"] == "partial", out.end["coverage_detail"]
    reasons = [d.get("reason", "") for d in out.end["coverage_detail"]]
    assert any(f"capped at {CAP} distinct destinations" in r for r in reasons), reasons
