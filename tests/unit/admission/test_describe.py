"""The registry described by a sandbox (runner/admission/describe.py), without Docker.

A scripted fake sandbox plays the runtime's side, so that every answer a hostile sandbox could
give is checked on the host; the real runtime side runs as a local process
(`UnsandboxedProcessBackend`) over trusted fixtures. Docker: tests/integration/
test_reproduce_manifest.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runner.admission.describe import sandbox_registry
from runner.backends.base import STDERR, STDOUT, Backend, ExitState, Reaped, Sandbox, SandboxSpec
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.domain.registry import Registry
from runner.domain.workflow import load_workflow
from runner.errors import InputError
from runner.policy import load_policy
from runner.settings import Settings
from runner.tools.locate import locate_tools
from runner.tools.source import registry_for_workflow
from runner.wire import protocol
from tests.support.paths import TESTS

GOLDEN = TESTS / "fixtures" / "golden"


class _Scripted(Sandbox):
    def __init__(self, spec: SandboxSpec, answer: dict[str, Any] | None, stderr: bytes) -> None:
        self.run_id = spec.run_id
        self.answer = answer
        self.out: list[tuple[int, bytes]] = [
            (STDOUT, protocol.encode({"type": "hello", "protocol": 1}))
        ]
        if stderr:
            self.out.append((STDERR, stderr))
        self.sent: list[dict[str, Any]] = []
        self.on_start: Any = None

    def write(self, data: bytes, timeout_s: float | None = None) -> None:
        message = protocol.decode(data)
        self.sent.append(message)
        if message["type"] == "start" and self.on_start is not None:
            self.on_start(message)
        if message["type"] == "start" and self.answer is not None:
            self.out.append((STDOUT, protocol.encode({"type": "manifest", **self.answer})))

    def frames(self, poll_s: float = 0.5) -> Iterator[tuple[int, bytes] | None]:
        while self.out:
            yield self.out.pop(0)

    def kill(self) -> None:
        pass

    def wait(self, timeout_s: float) -> ExitState:
        return ExitState(exit_code=0 if self.answer is not None else 1)


class _Backend(Backend):
    name = "scripted"

    def __init__(self, answer: dict[str, Any] | None = None, stderr: bytes = b"") -> None:
        self.answer, self.stderr = answer, stderr
        self.specs: list[SandboxSpec] = []
        self.run_json: dict[str, Any] = {}

    @contextmanager
    def sandbox(self, spec: SandboxSpec) -> Iterator[Sandbox]:
        self.specs.append(spec)
        box = _Scripted(spec, self.answer, self.stderr)

        def on_start(message: dict[str, Any]) -> None:  # the run travels in ``start``
            self.run_json = message["run"]

        box.on_start = on_start
        yield box

    def reap(self, ledger: str | None = None) -> list[Reaped]:
        return []


def _project(tmp_path: Path, marker: Path) -> Path:
    """The golden workflow and tools, the tool module writing ``marker`` when imported."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("golden.yaml", "golden_tools.py", "golden_model.py"):
        shutil.copy(GOLDEN / name, project / name)
    tools = project / "golden_tools.py"
    tools.write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + tools.read_text())
    return project / "golden.yaml"


def _describe(tmp_path: Path, backend: Backend, workflow: Path) -> Registry:
    return sandbox_registry(
        load_workflow(workflow),
        backend=backend,
        settings=Settings(state_dir=tmp_path / "state"),
        image="img",
        policy=load_policy("reproduce"),
    )


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


def test_the_host_locates_and_asks_without_importing_in_a_hardened_spec(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    workflow = _project(tmp_path, marker)
    backend = _Backend(_answer(_entry()))
    registry = _describe(tmp_path, backend, workflow)
    assert not marker.exists(), "the tool module ran on the host"
    [spec] = backend.specs
    assert backend.run_json["mode"] == "manifest"
    assert backend.run_json["modules"] == ["golden_tools"]
    assert backend.run_json["tool_paths"] == [f"{protocol.TOOLS_DIR}/0"]
    assert all(m.read_only for m in spec.mounts)
    assert spec.limits.timeout_s <= 60 and spec.user != "0"
    assert spec.command[-2:] == ("-m", "runner.runtime")
    assert not (tmp_path / "state" / "runs").exists(), "no run folder: the run is in start"
    tool = registry.resolve("ticket.fetch")
    assert tool.file == str(workflow.parent / "golden_tools.py") and tool.line == 7
    assert tool.schema_hash != "forged", "the schema hash is computed on the host"
    assert registry.tool_roots() == [workflow.parent]


def test_a_module_not_found_is_said_on_the_host_naming_the_entry(tmp_path: Path) -> None:
    workflow = tmp_path / "w.yaml"
    text = (GOLDEN / "golden.yaml").read_text().replace("[golden_tools]", "[nowhere_tools]")
    workflow.write_text(text)
    with pytest.raises(InputError) as caught:
        locate_tools(load_workflow(workflow))
    assert "cannot import tool module 'nowhere_tools': no such module" in str(caught.value)
    assert str(caught.value).startswith(f"{workflow}:5: tools[0]:")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (_answer(_entry(id="bad id!")), "'bad id!' is not a tool id"),
        (_answer(_entry(module="os")), "not defined by module 'golden_tools'"),
        (_answer(_entry(qualname="a b")), "bad qualname"),
        (_answer(_entry(schema=[])), "schema is not a JSON object"),
        ({"modules": "x"}, "unusable"),
        ({"modules": []}, "modules are missing"),
        ({"modules": [{"module": "other", "tools": []}]}, "no tool list for module"),
    ],
)
def test_a_hostile_answer_is_an_input_error(
    tmp_path: Path, answer: dict[str, Any], expected: str
) -> None:
    workflow = _project(tmp_path, tmp_path / "MARKER")
    with pytest.raises(InputError) as caught:
        _describe(tmp_path, _Backend(answer), workflow)
    assert expected in str(caught.value)
    assert str(workflow) in str(caught.value)


def test_answers_are_data_paths_outside_the_mounts_are_not_host_files(tmp_path: Path) -> None:
    workflow = _project(tmp_path, tmp_path / "MARKER")
    answer = _answer(
        _entry(file="/dev/zero", effect="pure", declared_effect="exec", line=True),
        _entry(id="b", qualname="b", file=f"{protocol.TOOLS_DIR}/0/../../../etc/passwd"),
    )
    registry = _describe(tmp_path, _Backend(answer), workflow)
    first, second = registry.resolve("ticket.fetch"), registry.resolve("b")
    assert first.file == "sandbox:/dev/zero" and first.line is None
    assert first.effect.value == "unsafe", "an unknown declared effect fails closed"
    assert second.file == "sandbox:/etc/passwd"


def test_import_errors_name_the_entry_with_host_paths(tmp_path: Path) -> None:
    workflow = _project(tmp_path, tmp_path / "MARKER")
    inside = f"{protocol.TOOLS_DIR}/0/golden_tools.py"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"kind": "syntax", "message": "invalid syntax", "file": inside, "line": 3}, "syntax"),
        ({"kind": "missing_dependency", "missing": "yaml\x1b[2J"}, "not installed in the sandbox"),
        ({"kind": "exception", "message": f"OSError: in {inside}"}, "OSError"),
    ]
    for error, expected in cases:
        answer = {"modules": [], "error": {"module": "golden_tools", "index": 0, **error}}
        with pytest.raises(InputError) as caught:
            _describe(tmp_path, _Backend(answer), workflow)
        message = str(caught.value)
        assert message.startswith(f"{workflow}:5: tools[0]: cannot import tool module")
        assert expected in message and "\x1b" not in message
        assert protocol.TOOLS_DIR not in message, message
    syntax = {"modules": [], "error": {"index": 0, **cases[0][0]}}
    with pytest.raises(InputError) as caught:
        _describe(tmp_path, _Backend(syntax), workflow)
    assert f"syntax error in {workflow.parent / 'golden_tools.py'}:3" in str(caught.value)


def test_no_answer_is_an_input_error_with_the_sandboxs_last_words(tmp_path: Path) -> None:
    workflow = _project(tmp_path, tmp_path / "MARKER")
    with pytest.raises(InputError) as caught:
        _describe(tmp_path, _Backend(None, stderr=b"Killed by the module\x1b[31m\n"), workflow)
    message = str(caught.value)
    assert "could not be described inside the sandbox" in message
    assert "exited with code 1" in message and "Killed by the module" in message
    assert "\x1b" not in message


def test_the_runtime_side_describes_like_the_host_import_did(tmp_path: Path) -> None:
    """Trusted fixture, local process: the same tools, hashes, files and lines as before."""
    registry = _describe(tmp_path, UnsandboxedProcessBackend(), GOLDEN / "golden.yaml")
    before = registry_for_workflow(load_workflow(GOLDEN / "golden.yaml"))
    assert [t.manifest_entry() for t in registry] == [t.manifest_entry() for t in before]
    assert [(t.file, t.line, t.declared_effect) for t in registry] == [
        (t.file, t.line, t.declared_effect) for t in before
    ]
    assert registry.tool_roots() == before.tool_roots()


def test_duplicate_ids_and_import_failures_come_back_from_the_runtime(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    for name in ("golden.yaml", "golden_tools.py"):
        shutil.copy(GOLDEN / name, project / name)
    (project / "dup_tools.py").write_text(
        "from runner.sdk import Effect, tool\n\n\n@tool('ticket.fetch', effect=Effect.READ)\n"
        "def fetch_again(ticket_id: str) -> str:\n    return ticket_id\n"
    )
    (project / "broken_tools.py").write_text("x = 1\ndef (:\n")
    workflow = project / "golden.yaml"
    text = (GOLDEN / "golden.yaml").read_text()
    workflow.write_text(text.replace("[golden_tools]", "[golden_tools, dup_tools]"))
    with pytest.raises(InputError) as caught:
        _describe(tmp_path, UnsandboxedProcessBackend(), workflow)
    message = str(caught.value)
    assert "tool id 'ticket.fetch' is defined twice" in message
    assert "golden_tools.py:30" in message and "dup_tools.py:4" in message
    workflow.write_text(text.replace("[golden_tools]", "[golden_tools, broken_tools]"))
    with pytest.raises(InputError) as caught:
        _describe(tmp_path, UnsandboxedProcessBackend(), workflow)
    message = str(caught.value)
    assert message.startswith(f"{workflow}:5: tools[1]: cannot import tool module 'broken_tools'")
    assert f"syntax error in {project / 'broken_tools.py'}:2" in message


def test_a_packet_cannot_name_a_folder_of_the_host_to_have_it_mounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tools: [golden_tools, Documents] with Documents/ in the current directory (a namespace
    package to PathFinder): a packet's modules come from the packet alone."""
    import hashlib
    import tarfile

    from runner.errors import InfrastructureError
    from runner.reproduce.inputs import safe_extract
    from runner.reproduce.reproducer import Reproducer
    from tests.support.fakes import trusted_packet

    trusted_packet(GOLDEN / "failing.jsonl", tmp_path / "p.tar.gz", state_dir=tmp_path / "state")
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    safe_extract(tmp_path / "p.tar.gz", unpacked)
    workflow = unpacked / "workflow" / "golden.yaml"
    text = workflow.read_text().replace("[golden_tools]", "[golden_tools, Documents]")
    workflow.write_text(text)
    lines = (unpacked / "trace.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["workflow"].update(content=text, hash=hashlib.sha256(text.encode()).hexdigest())
    (unpacked / "trace.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        for path in sorted(unpacked.rglob("*")):
            if path.is_file():
                archive.add(path, arcname=path.relative_to(unpacked).as_posix())
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.chdir(home)
    with pytest.raises(InputError):  # control: from a workflow file, the folder is found
        locate_tools(load_workflow(workflow), confined_to=workflow.parent)
    assert locate_tools(load_workflow(workflow)).roots()[-1] == home

    def no_docker() -> Any:
        raise InfrastructureError("no engine in this test")

    reproducer = Reproducer(Settings(state_dir=tmp_path / "state"), backend_factory=no_docker)
    report = reproducer.reproduce(evil)
    assert report.outcome == "refused", report.reason
    assert "cannot import tool module 'Documents': no such module" in report.reason
    assert str(home) not in report.reason.split("looked in")[-1]
