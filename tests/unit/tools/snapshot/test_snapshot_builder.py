"""The tool snapshot builder (runner/tools/snapshot/toolsnapshot.py, snapshot_sources.py).

What a sandbox may see of the user's folders: the declared modules and data files only, minus
by real path the tasks file, traces, the state folder, virtual environments, dot entries and
``__pycache__``; links never followed out of their folder; special files refused; modes reset
so uid 10001 can read; bounded; content-addressed with a digest that depends on nothing else.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from runner.domain.workflow import load_workflow
from runner.errors import InputError
from runner.tools.snapshot import tree as snapshot_tree
from runner.tools.snapshot.sources import match_files, project_snapshot
from runner.tools.snapshot.toolsnapshot import SnapshotEntry, ToolSnapshot, build_snapshot

TASK_LINE = '{"task_id": "t1", "input": {}, "expected": {"output": "SECRET"}}\n'
TRACE_LINE = '{"v": 1, "type": "run", "run_id": "r1"}\n'


def _files(snapshot: ToolSnapshot) -> dict[str, str]:
    """``{relative path: text}`` of every file in the snapshot."""
    out = {}
    for path in sorted(snapshot.path.rglob("*")):
        if path.is_file():
            out[path.relative_to(snapshot.path).as_posix()] = path.read_text()
    return out


def _package(root: Path) -> Path:
    package = root / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("A = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "tools.py").write_text("B = 2\n")
    (package / "data.json").write_text("{}\n")
    return package


def _build(root: Path, *relative: str, state: Path, exclude: tuple[Path, ...] = ()) -> ToolSnapshot:
    entries = [SnapshotEntry(root.resolve(), r, {"file": "wf.yaml"}) for r in relative]
    return build_snapshot(entries, state_dir=state, exclude=exclude)


def test_declared_modules_and_files_only_laid_out_per_source_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    (project / "data").mkdir(parents=True)
    (project / "tools.py").write_text("T = 1\n")
    (project / "helper.py").write_text("not declared\n")
    (project / "tasks.jsonl").write_text(TASK_LINE)
    (project / "answers.json").write_text('{"t1": "SECRET"}\n')
    (project / "data" / "kb.json").write_text("[]\n")
    (project / "data" / "notes.txt").write_text("not matched\n")
    _package(project)
    (project / "wf.yaml").write_text(
        'name: w\nversion: "1"\ntools: [tools, pkg.sub.tools]\nfiles: [data/*.json]\n'
        "steps:\n  - {id: a, tool: x.y, args: {}}\n"
    )
    monkeypatch.chdir(tmp_path)
    snapshot = project_snapshot([load_workflow(project / "wf.yaml")], state_dir=tmp_path / "st")
    assert snapshot.roots == (project.resolve(),)
    assert sorted(_files(snapshot)) == [
        "0/data/kb.json",
        "0/pkg/__init__.py",
        "0/pkg/data.json",
        "0/pkg/sub/__init__.py",
        "0/pkg/sub/tools.py",
        "0/tools.py",
    ]  # never the tasks file, answers.json, an undeclared module or the workflow itself
    assert snapshot.files == 6 and snapshot.bytes == sum(len(t) for t in _files(snapshot).values())
    assert snapshot.path == (tmp_path / "st").resolve() / "snapshots" / snapshot.digest


def test_exclusions_by_real_path_at_any_depth(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    package = _package(root)
    state = package / "state"  # the state folder inside a tool package
    (state / "traces").mkdir(parents=True)
    (state / "traces" / "r1.jsonl").write_text(TRACE_LINE)
    (package / "tasks.jsonl").write_text(TASK_LINE)
    (package / "answers.json").symlink_to(package / "tasks.jsonl")  # another name, same file
    os.link(package / "tasks.jsonl", package / "key.txt")  # a hard link: the same file too
    (package / "copy.json").write_text(TASK_LINE)  # a copy under a JSON name
    (package / "state-link").symlink_to(state)
    (package / "old-tasks.jsonl").write_text(TASK_LINE)  # not the command's, but task records
    (package / "recorded.jsonl").write_text(TRACE_LINE)  # a trace
    (package / "rows.jsonl").write_text('{"id": 1}\n')  # other JSONL data stays
    (package / "sub" / ".env").write_text("KEY=sk-secret\n")
    (package / ".git" / "objects").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (package / "venv" / "lib").mkdir(parents=True)
    (package / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (package / "venv" / "lib" / "mod.py").write_text("")
    (package / "lib" / "site-packages" / "dep").mkdir(parents=True)
    (package / "lib" / "site-packages" / "dep" / "__init__.py").write_text("")
    snapshot = _build(root, "pkg", state=state, exclude=(package / "tasks.jsonl",))
    assert sorted(_files(snapshot)) == [
        "0/pkg/__init__.py",
        "0/pkg/data.json",
        "0/pkg/rows.jsonl",
        "0/pkg/sub/__init__.py",
        "0/pkg/sub/tools.py",
    ]
    assert not (snapshot.path / "0" / "pkg" / "lib" / "site-packages").exists()


def test_links_are_followed_only_inside_their_source_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    root = tmp_path / "proj"
    package = _package(root)
    (package / "out.txt").symlink_to(outside / "secret.txt")
    (package / "outdir").symlink_to(outside)
    (package / "dangling").symlink_to(tmp_path / "nothing")
    (package / "alias.json").symlink_to(package / "data.json")  # inside: copied as a file
    (package / "loop").symlink_to(root)  # back up the tree: left out, no endless walk
    snapshot = _build(root, "pkg", state=tmp_path / "st")
    files = _files(snapshot)
    assert sorted(files) == [
        "0/pkg/__init__.py",
        "0/pkg/alias.json",
        "0/pkg/data.json",
        "0/pkg/sub/__init__.py",
        "0/pkg/sub/tools.py",
    ]
    assert files["0/pkg/alias.json"] == "{}\n"
    assert not any(p.is_symlink() for p in snapshot.path.rglob("*"))
    assert "host secret" not in "".join(files.values())


def test_a_declared_module_that_leads_out_of_its_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.py").write_text("X = 1\n")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "tools.py").symlink_to(tmp_path / "elsewhere.py")
    entry = SnapshotEntry(root, "tools.py", {"file": "wf.yaml", "line": 3}, required=True)
    with pytest.raises(InputError, match=r"wf\.yaml:3: .*leads outside its folder"):
        build_snapshot([entry], state_dir=tmp_path / "st")


def test_special_files_are_refused_with_their_name_and_never_opened(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    package = _package(root)
    os.mkfifo(package / "pipe")
    with pytest.raises(InputError, match=r"pipe is a FIFO: a tool snapshot copies regular"):
        _build(root, "pkg", state=tmp_path / "st")  # a FIFO opened for reading would hang
    (package / "pipe").unlink()
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(package / "sock"))
        with pytest.raises(InputError, match="sock is a socket"):
            _build(root, "pkg", state=tmp_path / "st")
    finally:
        server.close()
    built = tmp_path / "st" / "snapshots"
    assert not built.exists() or not list(built.iterdir())  # refused before anything is written


def test_modes_are_readable_by_the_sandbox_user_whatever_the_host_modes(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    package = _package(root)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    snapshot = _build(root, "pkg", state=tmp_path / "st")
    for path in [snapshot.path, *snapshot.path.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))
    assert stat.S_IMODE(package.stat().st_mode) == 0o700  # the source is left as it was


def test_the_digest_depends_on_content_and_paths_only(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "proj", tmp_path / "b" / "elsewhere"
    _package(first), _package(second)
    (second / "pkg" / "data.json").chmod(0o600)
    one = _build(first, "pkg", state=tmp_path / "st")
    two = _build(second, "pkg", state=tmp_path / "st")
    assert one.digest == two.digest and one.path == two.path  # shared, content-addressed
    assert one.roots != two.roots
    again = _build(first, "pkg", state=tmp_path / "other-state")
    assert again.digest == one.digest
    (second / "pkg" / "data.json").write_text("{ }\n")
    assert _build(second, "pkg", state=tmp_path / "st").digest != one.digest
    (second / "pkg" / "data.json").write_text("{}\n")
    (second / "pkg" / "data.json").rename(second / "pkg" / "data2.json")
    assert _build(second, "pkg", state=tmp_path / "st").digest != one.digest
    assert len(one.digest) == 64 and int(one.digest, 16) >= 0


def test_the_snapshot_keeps_what_was_read_and_a_damaged_one_is_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    package = _package(root)
    snapshot = _build(root, "pkg", state=tmp_path / "st")
    (package / "__init__.py").write_text("A = 'edited'\n")
    assert (snapshot.path / "0" / "pkg" / "__init__.py").read_text() == "A = 1\n"
    (package / "__init__.py").write_text("A = 1\n")
    copy = snapshot.path / "0" / "pkg" / "data.json"
    copy.write_text('{"tampered": true}\n')
    with pytest.raises(InputError, match="is damaged: its content no longer has its digest"):
        ToolSnapshot.load(tmp_path / "st", snapshot.to_json())
    rebuilt = _build(root, "pkg", state=tmp_path / "st")
    assert rebuilt.digest == snapshot.digest and copy.read_text() == "{}\n"
    loaded = ToolSnapshot.load(tmp_path / "st", json.loads(json.dumps(snapshot.to_json())))
    assert (loaded.digest, loaded.roots, loaded.files) == (
        snapshot.digest,
        snapshot.roots,
        snapshot.files,
    )
    with pytest.raises(InputError, match="not a tool snapshot record"):
        ToolSnapshot.load(tmp_path / "st", {"digest": "../x", "roots": []})


def test_limits_on_files_and_bytes_are_stated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    _package(root)
    monkeypatch.setattr(snapshot_tree, "MAX_FILES", 3)
    with pytest.raises(InputError, match=r"wf\.yaml: .*more than 3 files \(the limit\)"):
        _build(root, "pkg", state=tmp_path / "st")
    monkeypatch.setattr(snapshot_tree, "MAX_FILES", 100)
    monkeypatch.setattr(snapshot_tree, "MAX_BYTES", 8)
    with pytest.raises(InputError, match=r"more than 0 MiB \(the limit"):
        _build(root, "pkg", state=tmp_path / "st")


def test_mounts_are_read_only_in_run_order_and_unknown_folders_refused(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _package(one), _package(two)
    entries = [SnapshotEntry(one.resolve(), "pkg"), SnapshotEntry(two.resolve(), "pkg")]
    snapshot = build_snapshot(entries, state_dir=tmp_path / "st")
    mounts, paths = snapshot.mounts([two, one])
    assert paths == ["/sandbox/tools/0", "/sandbox/tools/1"]
    assert [m.source for m in mounts] == [snapshot.path / "1", snapshot.path / "0"]
    assert all(m.read_only for m in mounts)
    with pytest.raises(InputError, match="is not in the command's tool snapshot"):
        snapshot.mounts([tmp_path])


def test_file_globs_match_inside_the_folder_and_skip_what_is_never_copied(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    for rel in ("data/a.json", "data/b.txt", "data/deep/c.json", "data/.hidden.json"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("{}")
    (folder / "venv").mkdir()
    (folder / "venv" / "pyvenv.cfg").write_text("")
    (folder / "venv" / "x.json").write_text("{}")
    (folder / ".sandbox-replay").mkdir()
    (folder / ".sandbox-replay" / "y.json").write_text("{}")
    assert match_files(folder, "data/*.json") == ["data/a.json"]
    assert match_files(folder, "**/*.json") == ["data/a.json", "data/deep/c.json"]
    assert match_files(folder, "data/**") == ["data/a.json", "data/b.txt", "data/deep"]
    assert match_files(folder, "data") == ["data"]
    assert match_files(folder, "data/[ab].*") == ["data/a.json", "data/b.txt"]
    assert match_files(folder, "nothing/*.json") == []


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("../secret/*.json", "reaches outside the workflow's folder"),
        ("data/../../x", "reaches outside the workflow's folder"),
        ("/etc/passwd", "is absolute"),
        ("C:/data/x.json", "is absolute"),
        ("data\\\\x.json", "use / to separate folders"),
    ],
)
def test_a_files_glob_reaching_outside_is_an_input_error_with_line_and_field(
    tmp_path: Path, entry: str, message: str
) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(
        f'name: w\nversion: "1"\nfiles:\n  - data/*.json\n  - "{entry}"\n'
        "steps:\n  - {id: a, tool: x.y, args: {}}\n"
    )
    with pytest.raises(InputError) as caught:
        load_workflow(path)
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith(f"{path}:5: files[1]: ")
    assert message in str(caught.value)


def test_a_files_glob_matching_nothing_names_file_line_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "wf.yaml").write_text(
        'name: w\nversion: "1"\nfiles: [data/*.json, .env]\nsteps:\n  - {id: a, tool: x.y}\n'
    )
    (project / "data").mkdir()
    (project / "data" / "x.json").write_text("{}")
    (project / ".env").write_text("KEY=1\n")
    monkeypatch.chdir(project)
    with pytest.raises(InputError) as caught:
        project_snapshot([load_workflow(project / "wf.yaml")], state_dir=tmp_path / "st")
    assert str(caught.value).startswith(f"{project / 'wf.yaml'}:3: files[1]: '.env' matches no")
    assert "dot entries" in str(caught.value)


def test_a_sandboxed_run_never_mounts_a_live_tool_folder(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from runner.domain.ids import sequential_ids
    from runner.domain.tasks import Task
    from runner.episode.prepare import prepare_run
    from runner.episode.request import EpisodeRequest
    from runner.settings import Settings

    root = tmp_path / "proj"
    _package(root)
    workflow = 'name: w\nversion: "1"\ntools: [pkg]\nsteps: [{id: a, tool: x.y}]\n'
    (root / "wf.yaml").write_text(workflow)
    manifest = {"policy": {"name": "p", "mode": "shadow", "hash": "h"}, "tools": []}
    request = EpisodeRequest(
        workflow=load_workflow(root / "wf.yaml"),
        task=Task(task_id="t1", input={}),
        policy=SimpleNamespace(limits=None),
        registry=SimpleNamespace(manifest=lambda _p: manifest, tool_roots=lambda: [root]),
        image="img",
    )
    settings = Settings(state_dir=tmp_path / "st")
    with pytest.raises(ValueError, match="needs the command's tool snapshot"):
        prepare_run(request, settings, sequential_ids("a"))
    snapshot = _build(root, "pkg", state=tmp_path / "st")
    prepared = prepare_run(replace(request, snapshot=snapshot), settings, sequential_ids("b"))
    tools = [m for m in prepared.spec.mounts if m.target.startswith("/sandbox/tools")]
    assert [(m.source, m.target) for m in tools] == [(snapshot.path / "0", "/sandbox/tools/0")]
    assert not any(m.source == root.resolve() for m in prepared.spec.mounts)
    record = prepare_run(replace(request, mode="record"), settings, sequential_ids("c"))
    assert [m.source for m in record.spec.mounts if m.target == "/sandbox/tools/0"] == [
        root.resolve()
    ]  # record runs the project's own files, unsandboxed, on purpose


def test_a_build_left_by_a_killed_command_is_removed_later(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _package(root)
    home = tmp_path / "st" / "snapshots"
    stale, fresh = home / ".building-old", home / ".building-new"
    for folder in (stale, fresh):
        (folder / "0").mkdir(parents=True)
    os.utime(stale, (0, 0))
    snapshot = _build(root, "pkg", state=tmp_path / "st")
    assert not stale.exists() and fresh.exists()  # a build of a running command is left alone
    assert sorted(p.name for p in home.iterdir()) == [".building-new", snapshot.digest]


def test_a_program_brings_the_modules_of_its_folder_it_imports(tmp_path: Path) -> None:
    """SPEC: a program's module "and the packages it imports from the workflow's folder" are
    in the tool snapshot (examples/agent-program's agent imports its own ``agentloop``)."""
    from runner.sdk.agentcode import local_imports

    (tmp_path / "agent.py").write_text("import json\nfrom loop import run\nimport pkg.sub\n")
    (tmp_path / "loop.py").write_text("from helpers import x\n")
    (tmp_path / "helpers.py").write_text("x = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub.py").write_text("import unused_elsewhere\n")
    (tmp_path / "answers.json").write_text("{}")  # data is never picked up this way
    (tmp_path / "unrelated.py").write_text("")
    assert local_imports(tmp_path, "agent.py") == ["helpers.py", "loop.py", "pkg"]
