"""Descriptions kept in the state folder (runner/admission/cache.py).

A scripted fake sandbox plays the runtime, counting the sandboxes started: the same snapshot,
image id and policy start one; anything else starts another. A kept file is host-written but
read strictly: a damaged or edited one is ignored (and replaced), and what it holds is still
checked as a fresh answer is.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from runner.admission.cache import DESCRIPTIONS_DIR
from runner.admission.describe import sandbox_registry
from runner.backends.base import STDOUT, Backend, ExitState, Sandbox, SandboxSpec
from runner.domain.registry import Registry
from runner.domain.workflow import load_workflow
from runner.errors import InputError
from runner.policy import load_policy
from runner.settings import Settings
from runner.wire import protocol
from tests.support.paths import TESTS

GOLDEN = TESTS / "fixtures" / "golden"
ATTEMPT = {"kind": "connect", "address": "127.0.0.1", "port": 9, "outcome": "refused", "pid": 7}


class _Scripted(Sandbox):
    def __init__(self, spec: SandboxSpec, answer: dict[str, Any], egress: list[Any]) -> None:
        self.run_id = spec.run_id
        self.answer, self.egress = answer, egress
        self.out: list[tuple[int, bytes]] = [
            (STDOUT, protocol.encode({"type": "hello", "protocol": 1}))
        ]

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        if protocol.decode(data)["type"] == "start":
            for attempt in self.egress:
                self.out.append((STDOUT, protocol.encode({"type": "egress", "attempt": attempt})))
            self.out.append((STDOUT, protocol.encode({"type": "manifest", **self.answer})))

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        while self.out:
            yield self.out.pop(0)

    def kill(self) -> None:
        pass

    def wait(self, timeout_s: float) -> ExitState:
        return ExitState(exit_code=0)


class _Backend(Backend):
    name = "scripted"

    def __init__(self, answer: dict[str, Any], image_id: str | None = "sha256:abc") -> None:
        self.answer, self._image_id = answer, image_id
        self.egress: list[Any] = [ATTEMPT]
        self.started = 0

    def image_id(self, image: str) -> str:
        if self._image_id is None:
            raise RuntimeError("no id")
        return self._image_id

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        self.started += 1
        yield _Scripted(spec, self.answer, self.egress)

    def reap(self) -> list[str]:
        return []


def _entry(**changes: Any) -> dict[str, Any]:
    entry = {
        "id": "ticket.fetch",
        "effect": "read",
        "declared_effect": "read",
        "description": "d",
        "schema": {"type": "object", "properties": {}},
        "schema_hash": "forged",
        "module": "golden_tools",
        "qualname": "fetch",
        "file": f"{protocol.TOOLS_DIR}/0/golden_tools.py",
        "line": 7,
    }
    return {**entry, **changes}


def _answer(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"modules": [{"module": "golden_tools", "file": "x", "tools": list(entries)}]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("golden.yaml", "golden_tools.py"):
        shutil.copy(GOLDEN / name, folder / name)
    return folder / "golden.yaml"


def _describe(tmp_path: Path, backend: Backend, workflow: Path, policy: str = "shadow") -> Registry:
    return sandbox_registry(
        load_workflow(workflow),
        backend=backend,
        settings=Settings(state_dir=tmp_path / "state"),
        image="img",
        policy=load_policy(policy),
        cache=True,
    )


def _kept(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "state" / DESCRIPTIONS_DIR).glob("*.json"))


def test_the_same_snapshot_image_and_policy_start_one_sandbox(
    tmp_path: Path, project: Path
) -> None:
    backend = _Backend(_answer(_entry()))
    first = _describe(tmp_path, backend, project)
    with capture_logs() as logs:
        second = _describe(tmp_path, backend, project)
    assert backend.started == 1
    assert [t.manifest_entry() for t in first] == [t.manifest_entry() for t in second]
    [outbound] = [e for e in logs if e["event"] == "tool_import_outbound"]
    assert outbound["cached"] is True and outbound["destinations"] == [
        "connect 127.0.0.1:9 (refused)"
    ]
    _describe(tmp_path, backend, project, policy="reproduce")  # another policy hash
    assert backend.started == 2
    (project.parent / "golden_tools.py").write_text(
        (project.parent / "golden_tools.py").read_text() + "\n# edited\n"
    )
    _describe(tmp_path, backend, project)  # another snapshot
    assert backend.started == 3 and len(_kept(tmp_path)) == 3


def test_without_an_image_id_nothing_is_kept(tmp_path: Path, project: Path) -> None:
    backend = _Backend(_answer(_entry()), image_id=None)
    _describe(tmp_path, backend, project)
    _describe(tmp_path, backend, project)
    assert backend.started == 2 and _kept(tmp_path) == []


def test_an_answer_with_an_import_error_or_a_bad_entry_is_not_kept(
    tmp_path: Path, project: Path
) -> None:
    failing = _Backend(
        {
            "modules": [],
            "error": {"module": "golden_tools", "index": 0, "kind": "exception", "message": "boom"},
        }
    )
    with pytest.raises(InputError, match="boom"):
        _describe(tmp_path, failing, project)
    bad = _Backend(_answer(_entry(id="bad id!")))
    with pytest.raises(InputError, match="is not a tool id"):
        _describe(tmp_path, bad, project)
    assert _kept(tmp_path) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[:-5],  # cut: not JSON
        lambda text: text.replace('{"v": 1,', '{"v": 1, "v": 1,', 1),  # a duplicate key
        lambda text: text.replace('"line": 7', '"line": NaN'),
        lambda text: text.replace('{"v": 1,', '{"v": 1, "extra": 0,', 1),
        lambda text: text.replace('"v": 1', '"v": 2', 1),
        lambda text: text.replace('"key": "', '"key": "0', 1),
        lambda text: text.replace('"type": "manifest"', '"type": "episode"'),
        lambda text: text[:1] + "\udcff" + text[1:],  # not UTF-8 (byte 0xff)
    ],
)
def test_a_damaged_file_is_ignored_and_replaced(tmp_path: Path, project: Path, damage: Any) -> None:
    backend = _Backend(_answer(_entry()))
    _describe(tmp_path, backend, project)
    [path] = _kept(tmp_path)
    good = path.read_text()
    damaged = damage(good)
    assert damaged != good
    path.write_text(damaged, encoding="utf-8", errors="surrogateescape")
    with capture_logs() as logs:
        _describe(tmp_path, backend, project)
    assert backend.started == 2, "a damaged description was used"
    assert [e for e in logs if e["event"] == "tool_description_ignored"]
    assert json.loads(path.read_text()) == json.loads(good)


def test_what_a_kept_file_holds_is_checked_as_a_fresh_answer(tmp_path: Path, project: Path) -> None:
    backend = _Backend(_answer(_entry()))
    registry = _describe(tmp_path, backend, project)
    assert registry.resolve("ticket.fetch").schema_hash != "forged"  # computed on the host
    [path] = _kept(tmp_path)
    record = json.loads(path.read_text())
    record["answer"]["modules"][0]["tools"][0]["id"] = "bad id!"
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match="'bad id!' is not a tool id"):
        _describe(tmp_path, backend, project)
    record["answer"]["modules"][0]["tools"][0].update(id="ticket.fetch", file="/etc/passwd")
    path.write_text(json.dumps(record))
    tool = _describe(tmp_path, backend, project).resolve("ticket.fetch")
    assert tool.file == "sandbox:/etc/passwd" and backend.started == 1
