"""The shipped conformance checks fail a backend that breaks an invariant (no engine needed).

A fake backend's sandboxes print what a leaky sandbox would (a route out, root, capabilities,
the host's environment, a writable root) or cannot list its sandboxes: each check concerned
raises `ConformanceError` naming the finding, and the same checks pass the findings of a
sandbox that keeps the invariants. Nothing runs: the findings are canned.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runner.backends import conformance as C
from runner.backends.base import STDERR, STDOUT, Backend, ExitState, Reaped, Sandbox, SandboxSpec

GOOD = {
    "tools": [],
    "uid": 10001,
    "home": "/tmp",
    "tmpdir": "/tmp",
    "env_keys": ["HOME", "LANG", "PATH", "TMPDIR", "TZ"],
    "connect": "ENETUNREACH",
    "loopback": "ping",
    "dns": "gaierror",
    "dns_s": 0.01,
    "localhost": ["127.0.0.1", "::1"],
    "root_write": "EROFS",
    "tmp_write": "ok",
    "ro_write": "EROFS",
    "ro_read": "grüße from the host\n",
    "cap_eff": "0000000000000000",
    "no_new_privs": "1",
}


class _Canned(Sandbox):
    def __init__(self, run_id: str, out: bytes) -> None:
        self.run_id, self.out = run_id, out

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        pass

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        yield STDOUT, self.out
        yield STDERR, b"probe done\n"

    def kill(self) -> None:
        pass

    def wait(self, timeout_s: float) -> ExitState:
        return ExitState(0)


class _Fake(Backend):
    name = "fake"

    def __init__(self, findings: dict[str, Any], *, lists: bool = True) -> None:
        self.findings, self.lists = findings, lists

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        yield _Canned(spec.run_id, json.dumps(self.findings).encode() + b"\n")

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        return []

    def session_sandboxes(self) -> list[str] | None:
        return [] if self.lists else None


def _subject(tmp_path: Path, findings: dict[str, Any], *, lists: bool = True) -> C.Subject:
    backend = _Fake(findings, lists=lists)
    return C.Subject("fake", backend, "img", lambda _: backend, "", (), tmp_path)


LEAKS = [
    (C.no_route_out_but_loopback, {"connect": "connected"}, "connected"),
    (C.dns_fails_fast, {"dns": "resolved"}, "resolved"),
    (C.read_only_root_and_writable_tmp, {"root_write": "ok"}, "root_write"),
    (C.non_root_without_capabilities, {"uid": 0}, "'uid': 0"),
    (C.non_root_without_capabilities, {"cap_eff": "00000000a80425fb"}, "a80425fb"),
    (C.no_compilers_or_network_tools, {"tools": ["curl"]}, "curl"),
    (C.only_the_specs_environment, {"env_keys": ["PATH", "AWS_SECRET_ACCESS_KEY"]}, "AWS"),
    (C.read_only_mounts_of_any_path, {"ro_write": "ok"}, "ok"),
]


@pytest.mark.parametrize(("check", "leak", "named"), LEAKS, ids=[c.__name__ for c, *_ in LEAKS])
def test_a_leaky_sandbox_fails_the_check_that_concerns_it(
    tmp_path: Path, check: Any, leak: dict[str, Any], named: str
) -> None:
    check(_subject(tmp_path, GOOD))  # the same check passes a sandbox that keeps the invariant
    with pytest.raises(C.ConformanceError, match=named):
        check(_subject(tmp_path, {**GOOD, **leak}))


def test_a_backend_that_cannot_list_its_sandboxes_fails() -> None:
    subject = _subject(Path("/nonexistent"), GOOD, lists=False)
    with pytest.raises(C.ConformanceError, match="session_sandboxes"):
        subject.leftovers()


def test_every_check_has_a_docstring_and_a_unique_name() -> None:
    names = [c.__name__ for c in C.CHECKS]
    assert len(set(names)) == len(names) == 20
    assert all(c.__doc__ for c in C.CHECKS)
