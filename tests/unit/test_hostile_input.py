"""Hostile files on the host side: traces, task files, workflows, policies, packets, terminals.

SPEC.md: bad input gets a clear error naming file, line and field, never a traceback and never
lost data. A test marked ``xfail(strict=True)`` is an open weakness (the reason names it);
the others prove an attack is handled. No Docker: where a command would start a sandbox, the
engine address points at a socket that does not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
HELPDESK = ROOT / "tests" / "fixtures" / "helpdesk"
NO_ENGINE = {"SANDBOX_REPLAY_DOCKER_HOST": "unix:///nonexistent/sandbox-replay-test.sock"}
CONTROL = {chr(c) for c in range(0x20) if chr(c) not in "\n\t"} | {"\x7f", "\x9b"}


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **NO_ENGINE, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )


# --- reviewer packets ----------------------------------------------------------------------------


def _hostile_packet(tmp_path: Path, marker: Path) -> Path:
    """A packet of the golden failing run whose tool module and scripted model function, when
    imported, write ``marker`` (``MARKER.model`` for the model module)."""
    from runner.reproduce.inputs import safe_extract
    from tests.support.fakes import trusted_packet

    trusted_packet(GOLDEN / "failing.jsonl", tmp_path / "p.tar.gz", state_dir=tmp_path / "state")
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    safe_extract(tmp_path / "p.tar.gz", unpacked)
    for name, target in (("golden_tools", marker), ("golden_model", marker.with_suffix(".model"))):
        module = unpacked / "workflow" / f"{name}.py"
        payload = f"import os as _os\nopen({str(target)!r}, 'w').write(str(_os.getuid()))\n"
        module.write_text(payload + module.read_text())
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        for path in sorted(unpacked.rglob("*")):
            if path.is_file():
                archive.add(path, arcname=path.relative_to(unpacked).as_posix())
    return evil


def test_hostile_packet_control_its_code_runs_when_imported(tmp_path: Path) -> None:
    """Control: the planted code really runs when its module is imported."""
    marker = tmp_path / "MARKER"
    evil = _hostile_packet(tmp_path, marker)
    out = tmp_path / "x"
    out.mkdir()
    with tarfile.open(evil) as archive:
        archive.extractall(out, filter="data")
    subprocess.run(
        [sys.executable, "-c", "import golden_tools"], cwd=out / "workflow", check=True, timeout=60
    )
    assert marker.exists()


def test_reproducing_a_packet_never_runs_its_code_on_the_host(tmp_path: Path) -> None:
    """The registry is described by a sandbox (runner/admission/describe.py): with no
    engine reproduce stops at asking for one (exit 6), and no packet code ran before that.
    With Docker: tests/integration/test_reproduce_manifest.py."""
    marker = tmp_path / "MARKER"
    evil = _hostile_packet(tmp_path, marker)
    work = tmp_path / "work"
    work.mkdir()
    proc = run_cli("reproduce", str(evil), cwd=work)
    assert "Traceback" not in proc.stderr
    assert not marker.exists(), f"packet code ran on the host as uid {marker.read_text()}"
    model_marker = marker.with_suffix(".model")
    assert not model_marker.exists(), "the packet's scripted model module ran on the host"
    assert proc.returncode == 6, proc.stdout + proc.stderr  # it got as far as the sandbox


@pytest.mark.parametrize(
    "member",
    ["../outside.txt", "/abs.txt", "workflow/../../up.txt", "link", "dev"],
)
def test_packet_members_that_leave_the_folder_or_are_not_files_are_refused(
    tmp_path: Path, member: str
) -> None:
    from runner.reproduce.inputs import safe_extract

    packet = tmp_path / "p.tar.gz"
    with tarfile.open(packet, "w:gz") as archive:
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            archive.addfile(info)
        elif member == "dev":
            info.type = tarfile.CHRTYPE
            archive.addfile(info)
        else:
            data = b"x"
            info.size = len(data)
            import io

            archive.addfile(info, io.BytesIO(data))
    dest = tmp_path / "dest" / "inner"
    dest.mkdir(parents=True)
    with pytest.raises(InputError) as caught:
        safe_extract(packet, dest)
    assert "p.tar.gz" in str(caught.value)
    assert not (tmp_path / "dest" / "outside.txt").exists()
    assert not (tmp_path / "up.txt").exists() and not Path("/abs.txt").exists()


# --- task files ----------------------------------------------------------------------------------


def test_task_line_nested_too_deeply_is_an_input_error(tmp_path: Path) -> None:
    from runner.domain.tasks import load_tasks

    path = tmp_path / "tasks.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(
        '{"task_id": "ok", "input": {}}\n{"task_id": "a", "input": {"x": ' + deep + "}}\n"
    )
    loaded = load_tasks(path)
    assert list(loaded.tasks) == ["ok"]
    assert len(loaded.errors) == 1 and loaded.errors[0].fields.get("line") == 2


def test_cli_run_with_a_deep_task_file_exits_2_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"task_id": "a", "input": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}\n")
    proc = run_cli(
        "run", str(HELPDESK / "safe.yaml"), "--tasks", str(path), "--task", "a", cwd=tmp_path
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-1000:])


def test_nan_in_a_task_line_is_an_input_error(tmp_path: Path) -> None:
    from runner.domain.tasks import load_tasks

    path = tmp_path / "tasks.jsonl"
    path.write_text('{"task_id": "a", "input": {"x": NaN, "y": Infinity}}\n')
    loaded = load_tasks(path)
    assert not loaded.tasks and "NaN is not JSON" in str(loaded.errors[0])


def test_duplicate_keys_in_a_task_line_are_an_input_error(tmp_path: Path) -> None:
    from runner.domain.tasks import load_tasks

    path = tmp_path / "tasks.jsonl"
    path.write_text('{"task_id": "a", "task_id": "b", "input": {}}\n')
    loaded = load_tasks(path)
    assert not loaded.tasks and "duplicate key 'task_id'" in str(loaded.errors[0])
    assert loaded.errors[0].fields.get("line") == 1


@pytest.mark.parametrize(
    "task_id",
    ["..", ".", "../etc", "a/b", "a\\b", "x\x1b[2J", "a\u202eb", "trailing.", " lead", "C:x"],
)
def test_task_ids_that_would_be_unsafe_paths_are_rejected(tmp_path: Path, task_id: str) -> None:
    from runner.domain.tasks import load_tasks

    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task_id": task_id, "input": {}}) + "\n")
    loaded = load_tasks(path)
    assert not loaded.tasks
    assert loaded.errors[0].fields.get("line") == 1


def test_task_ids_differing_only_in_case_or_normalisation_collide(tmp_path: Path) -> None:
    from runner.domain.tasks import load_tasks

    path = tmp_path / "tasks.jsonl"
    ids = ["Task-A", "task-a", "caf\u00e9", "cafe\u0301", "\ufb00", "ff"]
    path.write_text("".join(json.dumps({"task_id": i, "input": {}}) + "\n" for i in ids))
    loaded = load_tasks(path)
    assert list(loaded.tasks) == ["Task-A", "caf\u00e9", "\ufb00"]
    assert [e.fields.get("line") for e in loaded.errors] == [2, 4, 6]


@pytest.mark.parametrize("task_id", ["CON", "nul", "COM1", "LPT1", "aux.txt"])
def test_windows_reserved_names_are_rejected_as_ids(task_id: str) -> None:
    from runner.domain.ids import id_problem

    assert id_problem(task_id) is not None


@pytest.mark.parametrize("task_id", ["console", "com10", "lpt", "auxiliary.txt", "x.con", "_aux"])
def test_names_that_only_look_like_devices_stay_valid(task_id: str) -> None:
    from runner.domain.ids import id_problem

    assert id_problem(task_id) is None


def test_imported_ids_that_are_device_names_get_a_prefix() -> None:
    from runner.domain.ids import IdSet, id_problem
    from runner.importers.source import derive_id

    taken = IdSet()
    derived = [derive_id(text, taken) for text in ("con", "Aux.txt", "nul")]
    assert derived == ["_con", "_Aux.txt", "_nul"]
    assert all(id_problem(d) is None for d in derived)


# --- workflows and policies ---------------------------------------------------------------------


def test_deeply_nested_workflow_yaml_is_an_input_error(tmp_path: Path) -> None:
    from runner.domain.workflow import load_workflow

    path = tmp_path / "deep.yaml"
    path.write_text('name: w\nversion: "1"\ntools: []\nsteps: ' + "[" * 50_000 + "]" * 50_000)
    with pytest.raises(InputError) as caught:
        load_workflow(path)
    assert "deep.yaml" in str(caught.value)


def test_deeply_nested_policy_yaml_is_an_input_error(tmp_path: Path) -> None:
    from runner.policy import load_policy

    path = tmp_path / "deep.yaml"
    path.write_text("name: p\nmode: shadow\nx: " + "{a: " * 30_000 + "1" + "}" * 30_000 + "\n")
    with pytest.raises(InputError) as caught:
        load_policy(str(path))
    assert "deep.yaml" in str(caught.value)


BOMB = "".join(
    f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join([f'*{chr(96 + i)}'] * 9) if i else 'x'}]\n"
    for i in range(9)
)


@pytest.mark.parametrize("kind", ["workflow", "policy"])
def test_yaml_alias_bomb_is_an_input_error(tmp_path: Path, kind: str) -> None:
    from runner.domain.workflow import load_workflow
    from runner.policy import load_policy

    path = tmp_path / f"{kind}.yaml"
    head = (
        'name: w\nversion: "1"\ntools: []\nsteps: []\n'
        if kind == "workflow"
        else ("name: p\nmode: shadow\n")
    )
    path.write_text(head + BOMB)
    with pytest.raises(InputError) as caught:
        load_workflow(path) if kind == "workflow" else load_policy(str(path))
    assert "aliases" in str(caught.value)


def test_a_policy_cannot_ask_for_record_mode(tmp_path: Path) -> None:
    """Record mode (every tool with code executes, unsandboxed) is reachable only by `record`."""
    from runner.policy import load_policy

    path = tmp_path / "p.yaml"
    path.write_text("name: p\nmode: record\n")
    with pytest.raises(InputError) as caught:
        load_policy(str(path))
    assert "mode" in str(caught.value)


def test_unsafe_allow_in_shadow_serves_from_recordings_never_executes(tmp_path: Path) -> None:
    from runner.domain.workflow import load_workflow
    from runner.policy import load_policy
    from runner.tools.source import registry_for_workflow

    path = tmp_path / "p.yaml"
    path.write_text("name: p\nmode: shadow\ntools:\n  unsafe_allow: [ticket.close]\n")
    policy = load_policy(str(path))
    manifest = (
        registry_for_workflow(load_workflow(HELPDESK / "unsafe_step.yaml"))
        .restrict(policy)
        .manifest(policy)
    )
    tools = {t["id"]: t for t in manifest["tools"]}
    assert tools["ticket.close"]["disposition"] == "recorded"
    assert "email.send" not in tools and "legacy.purge" not in tools
    assert all(
        t["disposition"] == "recorded"
        for t in tools.values()
        if t["effect"] != "pure" and t["effect"] != "local"
    )


# --- the host under a flood of made-up step ids ----------------------------------------------


def test_host_keeps_only_the_workflows_step_ids() -> None:
    from types import SimpleNamespace

    from runner.episode.channel import Channel
    from runner.episode.state import EpisodeState

    prepared = SimpleNamespace(
        run_id="r", run_spec={"workflow": {"steps": [{"id": "fetch"}, {"id": "answer"}]}}
    )
    state = EpisodeState(request=None, prepared=prepared, channel=Channel())  # type: ignore[arg-type]
    state.hello = {"type": "hello"}
    for i in range(10_000):
        state._on_step({"type": "step", "step_id": f"made-up-{i}", "state": "started"}, None)
    state._on_step({"type": "step", "step_id": "fetch", "state": "finished" * 1000}, None)
    assert state.steps == {"fetch": ("finished" * 1000)[:32]}


# --- importers ----------------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("command", "name", "text", "extra"),
    [
        ("openai-messages", "chat.jsonl", '{"messages": ' + DEEP + "}\n", ()),
        ("openai-messages", "chat.json", DEEP, ()),
        ("openai-messages", "ok.jsonl", "", ("--tools", "tools.json")),
        ("tau2", "results.json", '{"tasks": ' + DEEP + "}", ()),
    ],
    ids=["chat-jsonl", "chat-json", "tools-file", "tau2"],
)
def test_deeply_nested_import_files_are_input_errors(
    tmp_path: Path, command: str, name: str, text: str, extra: tuple[str, ...]
) -> None:
    (tmp_path / name).write_text(text or '{"messages": [{"role": "user", "content": "hi"}]}\n')
    (tmp_path / "tools.json").write_text(DEEP)
    proc = run_cli("import", command, name, "--out", "out", *extra, cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr[-500:]
    assert proc.returncode == 2, proc.returncode


def test_a_deep_jsonl_line_is_named_and_deep_call_arguments_stay_text(tmp_path: Path) -> None:
    from runner.importers.source import parse_arguments

    ok = '{"messages": [{"role": "user", "content": "hi"}]}\n'
    (tmp_path / "chat.jsonl").write_text(ok + '{"messages": ' + DEEP + "}\n")
    proc = run_cli("import", "openai-messages", "chat.jsonl", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-500:]
    assert "chat.jsonl:2" in proc.stderr and "nested too deeply" in proc.stderr, proc.stderr
    # a model's call arguments too deep to parse are kept as its text, marked not an object
    assert parse_arguments('{"q": ' + DEEP + "}") == ({}, '{"q": ' + DEEP + "}", False)


def test_tasks_extract_of_a_trace_holding_a_lone_surrogate(tmp_path: Path) -> None:
    """Traces keep undecodable text as ``\\udcff`` escapes; extract used to crash half-way."""
    from runner.domain.tasks import load_tasks

    lines = (ROOT / "tests/fixtures/traces/complete_succeeded.jsonl").read_text().splitlines()
    run = json.loads(lines[0])
    run["task_input"]["question"] = "bad \udcff byte"
    (tmp_path / "t.jsonl").write_text("\n".join([json.dumps(run), *lines[1:]]) + "\n")
    proc = run_cli("tasks", "extract", "t.jsonl", "-o", "tasks.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-1000:]
    loaded = load_tasks(tmp_path / "tasks.jsonl")
    assert not loaded.errors
    assert next(iter(loaded.tasks.values())).input["question"] == "bad \udcff byte"
