"""Paths a trace or packet chooses (items 1, 2, 12, 13): none leaves its folder.

Every untrusted name becomes a path only through `runner.domain.ids.path_for_id` /
`path_under`: the workflow a trace carries is written inside the run's scratch folder, packet
members stay inside the packet's folder, a trace's tool entries resolve inside the trace's own
folder (never the current directory, the installed packages, an absolute path or ``..``), and
``packet`` never imports the trace folder's tool modules on the host. The attacks with real
containers are in tests/integration/test_trace_path_attacks.py.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InfrastructureError, InputError
from runner.reproduce.reproducer import Reproducer
from runner.settings import Settings

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
CLI = str(Path(sys.executable).parent / "sandbox-replay")
NO_ENGINE = {"SANDBOX_REPLAY_DOCKER_HOST": "unix:///nonexistent/sandbox-replay-test.sock"}


def _no_docker() -> Any:
    raise InfrastructureError("no engine in this test")


def _reproducer(tmp_path: Path) -> Reproducer:
    return Reproducer(Settings(state_dir=tmp_path / "state"), backend_factory=_no_docker)


def _trace(folder: Path, *, name: str | None = None, content: str | None = None) -> Path:
    """The golden failing trace in ``folder``, its recorded workflow's name/content replaced."""
    lines = (GOLDEN / "failing.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    workflow = head["workflow"]
    if content is not None:
        workflow.update(content=content, hash=hashlib.sha256(content.encode()).hexdigest())
    if name is not None:
        workflow["name"] = name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trace.jsonl"
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    return path


def _tar(path: Path, members: list[tuple[str, bytes | None]]) -> Path:
    """A ``.tar.gz`` of ``(name, data)``; data None makes a directory member."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return path


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args],
        cwd=cwd,
        env={**os.environ, **NO_ENGINE, "SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- the one function ---------------------------------------------------------------------------


def test_path_for_id_keeps_a_valid_name_inside_its_root(tmp_path: Path) -> None:
    from runner.domain.ids import path_for_id

    assert path_for_id(tmp_path, "golden-helpdesk", suffix=".yaml") == (
        tmp_path / "golden-helpdesk.yaml"
    )
    for bad in ("../x", "/etc/x", "a/b", ".", "..", "", "aux", "x" * 200, "a\x00b"):
        with pytest.raises(InputError) as caught:
            path_for_id(tmp_path, bad, kind="workflow name", file="t.jsonl", line=1, field="f")
        assert str(caught.value).startswith("t.jsonl:1: f: invalid workflow name")


def test_path_under_refuses_absolute_paths_dotdot_and_links_out(tmp_path: Path) -> None:
    from runner.domain.ids import path_under

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    assert path_under(root, "sub/m.json") == root / "sub" / "m.json"
    assert path_under(root, "./sub/m.json") == root / "sub" / "m.json"
    for bad in ("/etc/passwd", "../x.json", "sub/../../x.json", "sub\\..\\x", "", "a//.."):
        with pytest.raises(InputError):
            path_under(root, bad)
    (root / "out").symlink_to(tmp_path)  # a link inside the root cannot lead out of it
    with pytest.raises(InputError, match="leaves"):
        path_under(root, "out/x.json")
    with pytest.raises(InputError, match="characters"):
        path_under(root, "/".join(["d" * 100] * 12))


# --- item 1: the trace's workflow copy stays in the scratch folder ------------------------------


def _planted_names(tmp_path: Path) -> list[str]:
    target = tmp_path / "victim" / "v2"  # the user's own v2.yaml
    depth = "../" * 12
    return [str(target), depth + str(target).lstrip("/")]


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
@pytest.mark.parametrize("as_packet", [False, True], ids=["trace", "packet"])
def test_a_trace_cannot_write_its_workflow_outside_the_scratch_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, as_packet: bool
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "v2.yaml").write_text("name: mine\n")
    name = _planted_names(tmp_path)[how == "dotdot"]
    content = (GOLDEN / "golden.yaml").read_text() + "# changed: no file has this hash\n"
    trace = _trace(tmp_path / "away", name=name, content=content)
    given = trace
    if as_packet:  # a packet holding only trace.jsonl
        given = _tar(tmp_path / "only-trace.tar.gz", [("trace.jsonl", trace.read_bytes())])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    report = _reproducer(tmp_path).reproduce(given)
    assert (victim / "v2.yaml").read_text() == "name: mine\n", "the trace replaced a user file"
    assert (report.outcome, report.exit_code) == ("invalid", 2), report.reason
    assert "workflow.name: invalid workflow name" in report.reason


def test_a_valid_workflow_name_is_written_in_the_scratch_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: with a valid name the copy is used (here: its tools resolve in the trace's
    folder, which holds none, so the replay is refused naming the module)."""
    content = (GOLDEN / "golden.yaml").read_text() + "# changed\n"
    trace = _trace(tmp_path / "away", content=content)
    monkeypatch.chdir(tmp_path)
    report = _reproducer(tmp_path).reproduce(trace)
    assert report.outcome == "refused", report.reason
    assert "cannot import tool module 'golden_tools'" in report.reason


# --- item 13 (packet part): members that cannot be files here are exit 2 ----------------------


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("x" * 300 + ".py", b"x")], "303 characters long; at most 128"),
        ([("workflow", b"file"), ("workflow/m.py", b"x")], "is a file, so it cannot also be"),
        ([("workflow/m.py", b"x"), ("workflow", b"file")], "is a folder, so it cannot also"),
        ([("a", None), ("a", b"file")], "'a' is a folder, so it cannot also be a file"),
        ([("trace.jsonl", b"1"), ("Trace.jsonl", b"2")], "names differing only in case"),
        ([("trace.jsonl", b"1"), ("trace.jsonl", b"2")], "'trace.jsonl': listed twice"),
        ([("aux.py", b"x")], "names a Windows device"),
    ],
    ids=["long", "file-then-dir", "dir-then-file", "dir-and-file", "case", "twice", "device"],
)
def test_packet_members_that_cannot_be_files_here_are_invalid_input(
    tmp_path: Path, members: list[tuple[str, bytes | None]], message: str
) -> None:
    packet = _tar(tmp_path / "p.tar.gz", members)
    proc = _cli("reproduce", str(packet), cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "p.tar.gz" in proc.stdout and "member" in proc.stdout, proc.stdout
    assert message in proc.stdout, proc.stdout


def test_a_packet_built_with_dot_slash_names_still_extracts(tmp_path: Path) -> None:
    from runner.reproduce.inputs import safe_extract

    packet = _tar(tmp_path / "p.tar.gz", [(".", None), ("./trace.jsonl", b"{}"), ("./w/", None)])
    out = tmp_path / "out"
    out.mkdir()
    safe_extract(packet, out)
    assert (out / "trace.jsonl").read_bytes() == b"{}" and (out / "w").is_dir()


# --- item 12: a trace's tool entries resolve only inside its own folder ------------------------


def _hostile_workflow(tools: str) -> str:
    return (GOLDEN / "golden.yaml").read_text().replace("[golden_tools]", tools)


def _trace_folder(tmp_path: Path, tools: str) -> Path:
    """A trace beside its (hash-matching) workflow file and the golden tool modules."""
    folder = tmp_path / "trace-folder"
    text = _hostile_workflow(tools)
    trace = _trace(folder, content=text)
    (folder / "golden.yaml").write_text(text)
    for name in ("golden_tools.py", "golden_model.py"):
        shutil.copy(GOLDEN / name, folder / name)
    return trace


def test_a_trace_cannot_name_a_folder_of_the_current_directory_as_a_tool_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = _trace_folder(tmp_path, "[golden_tools, Documents]")
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "secret.txt").write_text("s3cret")
    monkeypatch.chdir(home)
    report = _reproducer(tmp_path).reproduce(trace)
    # today: Documents resolves in the current directory, which is mounted (an engine is asked)
    assert report.outcome == "refused", report.reason
    assert "cannot import tool module 'Documents': no such module" in report.reason
    assert str(home) not in report.reason


@pytest.mark.parametrize("where", ["absolute", "dotdot", "link"])
def test_a_trace_cannot_make_the_host_read_a_json_file_outside_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text("SECRET-NOT-JSON")
    entry = {"absolute": str(secret), "dotdot": "../secret.json", "link": "inside.json"}[where]
    trace = _trace_folder(tmp_path, f"[golden_tools, {json.dumps(entry)}]")
    if where == "link":
        (trace.parent / "inside.json").symlink_to(secret)
    monkeypatch.chdir(tmp_path)
    report = _reproducer(tmp_path).reproduce(trace)
    assert report.outcome in ("refused", "invalid"), report.reason
    assert "not JSON" not in report.reason, "the host read the file the trace named"
    assert "tools[1]" in report.reason and "leaves" in report.reason, report.reason


def test_a_trace_cannot_mount_an_installed_package_or_a_plain_folder(tmp_path: Path) -> None:
    from runner.domain.workflow import load_workflow
    from runner.tools.locate import locate_tools

    trace = _trace_folder(tmp_path, "[golden_tools, yaml]")
    workflow = load_workflow(trace.parent / "golden.yaml")
    assert locate_tools(workflow).modules[-1][1] == "yaml"  # control: the user's own workflow
    with pytest.raises(InputError, match="'yaml': no such module"):
        locate_tools(workflow, confined_to=trace.parent)
    (trace.parent / "Music").mkdir()
    (trace.parent / "golden.yaml").write_text(_hostile_workflow("[golden_tools, Music]"))
    with pytest.raises(InputError, match=r"'Music' is a folder without __init__\.py"):
        locate_tools(load_workflow(trace.parent / "golden.yaml"), confined_to=trace.parent)


def test_a_module_linked_from_outside_the_trace_folder_is_refused(tmp_path: Path) -> None:
    from runner.domain.workflow import load_workflow
    from runner.tools.locate import locate_tools

    trace = _trace_folder(tmp_path, "[golden_tools, extra]")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "extra.py").write_text("X = 1\n")
    (trace.parent / "extra.py").symlink_to(elsewhere / "extra.py")
    workflow = load_workflow(trace.parent / "golden.yaml")
    with pytest.raises(InputError, match="leaves"):
        locate_tools(workflow, confined_to=trace.parent)
    assert locate_tools(workflow).roots()[-1] == elsewhere  # control: the link is followed


# --- item 2: packet never imports the trace folder's modules on the host ----------------------


def test_packet_never_imports_the_trace_folders_tool_modules_on_the_host(tmp_path: Path) -> None:
    """With no engine, ``packet`` stops at asking for one (exit 6): the registry is described
    in a sandbox; no module code ran before that (with Docker:
    tests/integration/test_trace_path_attacks.py)."""
    trace = _trace_folder(tmp_path, "[golden_tools]")
    marker = tmp_path / "MARKER"
    module = trace.parent / "golden_tools.py"
    module.write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + module.read_text())
    work = tmp_path / "work"
    work.mkdir()
    proc = _cli(
        "packet",
        str(trace),
        "-o",
        str(work / "p.tar.gz"),
        cwd=work,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not marker.exists(), "packet imported the trace folder's tool module on the host"
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert not (work / "p.tar.gz").exists()


def test_a_file_the_sandbox_reports_is_a_host_path_only_inside_its_tool_folder(
    tmp_path: Path,
) -> None:
    """What the describing sandbox says is untrusted: the packet packs and reproduce reads
    the host files it names, so a name leading out of the tool folder is no host path."""
    from runner.admission.answer import PathMap

    root = tmp_path / "tools"
    root.mkdir()
    (root / "ok.py").write_text("")
    (root / "out.py").symlink_to(tmp_path / "secret.py")
    paths = PathMap(["/sandbox/tools/0"], [root], [tmp_path / "state" / "copy"])
    assert paths.file("/sandbox/tools/0/ok.py") == str(root / "ok.py")
    assert paths.file("/sandbox/tools/0/out.py").startswith("sandbox:")
    assert paths.file("/sandbox/tools/0/../../../etc/passwd") == "sandbox:/etc/passwd"
    assert paths.file(str(tmp_path / "secret.py")).startswith("sandbox:")


# --- the other places an untrusted name became a path -------------------------------------------


def test_a_tau2_domain_name_cannot_name_a_tools_file_outside_the_results_folder(
    tmp_path: Path,
) -> None:
    from runner.importers.tau2 import read_tau2

    mini = GOLDEN.parents[0] / "import" / "tau2-mini"
    data = json.loads((mini / "results.json").read_text())
    data["info"]["environment_info"]["domain_name"] = "../outside/mini"
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(data))
    (tmp_path / "outside").mkdir()
    shutil.copy(mini / "mini_tools.json", tmp_path / "outside" / "mini_tools.json")
    source = read_tau2(folder / "results.json")
    # today: ../outside/mini_tools.json, a file the results chose, was read for the tools
    assert any("no tools file" in note for note in source.notes), source.notes
    assert all(tool.schema is None for tool in source.tools)


def test_job_and_run_folders_are_named_through_the_id_rules(tmp_path: Path) -> None:
    from runner.submit.jobfolder import job_dir

    settings = Settings(state_dir=tmp_path / "state")
    assert job_dir(settings, "job-1") == (tmp_path / "state").resolve() / "jobs" / "job-1"
    (tmp_path / "state" / "jobs").mkdir(parents=True)
    (tmp_path / "state" / "jobs" / "linked").symlink_to(tmp_path)
    for bad in ("../x", "/abs", "linked"):
        with pytest.raises(InputError, match="job id"):
            job_dir(settings, bad)
