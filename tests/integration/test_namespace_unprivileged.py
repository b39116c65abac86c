"""The namespace backend run by a user without root, for real.

The host side (the CLI) runs as an unprivileged user (``sandbox-replay-nr``, made with
``useradd`` when missing) with the system's Python of the same version as this one over this
checkout and its virtualenv's packages; the root filesystem is the sandbox image's, exported by
root once and given to the user as ``SANDBOX_REPLAY_NAMESPACE_ROOTFS``. Without root there are
no cgroups: the limits are rlimits. Attacks the review ran:

- every run was ``infra_error`` where ``/bin/sh`` is dash (no ``ulimit -u``): a run succeeds;
- ``/dev`` was a tmpfs of half the RAM (2 GB written under memory 512 MB): it is read-only;
- ``RLIMIT_NPROC`` is shared by every sandbox of the uid (a fork bomb crashed other runs): the
  plan admits one sandbox at a time in rlimit mode and says why, and an honest run beside a
  fork bomb in the same job succeeds.

Fails (never skips) under CI=true when root, bwrap or a matching system Python is missing.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _unusable
from tests.support.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

USER = "sandbox-replay-nr"

TOOLS = """
import os, time

from runner.sdk import Effect, tool


@tool("probe.upper", effect=Effect.PURE, description="Upper-case a text.")
def upper(text: str) -> str:
    return text.upper()


@tool("probe.fill_dev", effect=Effect.LOCAL, description="Write into /dev.")
def fill_dev(mb: int) -> str:
    written = 0
    try:
        with open("/dev/filler", "wb") as f:
            for _ in range(mb):
                f.write(b"x" * (1 << 20))
                written += 1
    except OSError as exc:
        return f"refused after {written} MB: {exc.strerror}"
    return f"wrote {written} MB"


@tool("probe.fork_bomb", effect=Effect.LOCAL, description="Fork until refused, then hold.")
def fork_bomb(hold_s: float) -> str:
    children = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(hold_s)
                os._exit(0)
            children += 1
    except OSError as exc:
        time.sleep(hold_s)
        return f"{children} children, then {exc.strerror}"


@tool("probe.honest", effect=Effect.PURE, description="Fork one child, wait, answer.")
def honest(wait_s: float) -> str:
    time.sleep(wait_s)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "done"
"""


def _workflow(version: str, tool: str, args: str) -> str:
    return (
        f'name: probe\nversion: "{version}"\ntools: [probe_tools]\nsteps:\n'
        f"  - id: s\n    tool: {tool}\n    args: {args}\n"
    )


@pytest.fixture(scope="module")
def user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        _unusable("making and becoming an unprivileged user needs root", "bwrap")
    if shutil.which("bwrap") is None:
        _unusable("bwrap is not installed", "bwrap")
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        made = subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/bin/sh", "--home-dir", "/nonexistent",
             USER],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            _unusable(f"useradd {USER} failed: {made.stderr}", "bwrap")
        return pwd.getpwnam(USER)


def _system_python() -> str:
    """A Python of this interpreter's version that any user may run (the venv's may not)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        real = os.path.realpath(candidate)
        if all(os.stat(p).st_mode & 0o001 for p in [real, *map(str, Path(real).parents)]):
            return real
    _unusable(f"no {version} that an unprivileged user can run", "bwrap")
    raise AssertionError  # unreachable


@pytest.fixture(scope="module")
def rootfs(sandbox_image: str) -> Iterator[Path]:
    """The sandbox image's root filesystem, exported by root, readable by every user."""
    from runner.backends.namespace import NamespaceBackend

    folder = Path(tempfile.mkdtemp(prefix="srnr-rootfs-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        tree = NamespaceBackend(folder).rootfs(sandbox_image).tree
        for parent in [tree, *tree.parents]:
            if parent == Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o005)
        yield tree
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home() -> Iterator[Path]:
    """A folder of the test's own under /tmp that every user may search (pytest's own base
    folder is root's, mode 0700, and reset by every pytest session)."""
    folder = Path(tempfile.mkdtemp(prefix="srnr-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _project(root: Path, owner: pwd.struct_passwd, workflows: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    tasks = json.dumps({"task_id": "t1", "input": {}}) + "\n"
    for name, text in {"probe_tools.py": textwrap.dedent(TOOLS), "tasks.jsonl": tasks,
                       **workflows}.items():  # fmt: skip
        (root / name).write_text(text, encoding="utf-8")
    for path in [root, *root.iterdir()]:
        os.chown(path, owner.pw_uid, owner.pw_gid)
    return root


def _cli_as(
    owner: pwd.struct_passwd, work: Path, tree: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    site = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work),
        "PYTHONPATH": f"{REPO}:{site}",
        "SANDBOX_REPLAY_STATE_DIR": str(work / "state"),
        "SANDBOX_REPLAY_NAMESPACE_ROOTFS": str(tree),
        "SANDBOX_REPLAY_POOL": "0",
        "XDG_CACHE_HOME": str(work / "cache"),
    }
    code = "import sys; from runner.cli.entry import main; sys.argv[0] = 'sandbox-replay'; main()"
    return subprocess.run(
        [_system_python(), "-c", code, *args],
        cwd=work,
        env=env,
        user=owner.pw_uid,
        group=owner.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON document on stdout (one line, or indented as ``--dry-run`` prints it)."""
    start = done.stdout.find("{")
    assert start >= 0, done.stdout + done.stderr
    return json.JSONDecoder().raw_decode(done.stdout[start:])[0]


def _traces(work: Path) -> list[list[dict[str, Any]]]:
    out = []
    for path in sorted((work / "state" / "traces").glob("*.jsonl")):
        out.append([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()])
    return out


def _output(trace: list[dict[str, Any]]) -> str:
    """The episode's output (the last step's result), or its error."""
    end = trace[-1]
    return str(end.get("output") or end.get("error") or "")


def test_a_run_succeeds_without_root_under_dash_and_dev_is_read_only(
    user: pwd.struct_passwd, rootfs: Path, home: Path
) -> None:
    work = _project(home / "p", user, {"fill.yaml": _workflow("1", "probe.fill_dev", "{mb: 256}")})
    done = _cli_as(user, work, rootfs, "run", "fill.yaml", "--tasks", "tasks.jsonl", "--task",
                   "t1", "--backend", "namespace", "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (trace,) = _traces(work)
    assert trace[-1]["status"] == "succeeded", trace[-1]
    assert _output(trace) == "refused after 0 MB: Read-only file system", trace


def test_a_fork_bomb_beside_an_honest_run_leaves_it_running(
    user: pwd.struct_passwd, rootfs: Path, home: Path
) -> None:
    work = _project(
        home / "p",
        user,
        {
            "bomb.yaml": _workflow("1", "probe.fork_bomb", "{hold_s: 4}"),
            "honest.yaml": _workflow("2", "probe.honest", "{wait_s: 2}"),
        },
    )
    args = ["submit", "--variant", "bomb.yaml", "--variant", "honest.yaml", "--tasks",
            "tasks.jsonl", "--backend", "namespace", "--concurrency", "2", "--json"]  # fmt: skip
    plan = _json(_cli_as(user, work, rootfs, *args, "--dry-run"))["plan"]
    bound = plan["concurrency_bound"]
    assert plan["concurrency"] == 1, bound
    assert "RLIMIT_NPROC" in bound["bounds"]["rlimits"]["why"], bound
    done = _cli_as(user, work, rootfs, *args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    by_version = {t[0]["workflow"]["version"]: t for t in _traces(work)}
    assert by_version["2"][-1]["status"] == "succeeded", by_version["2"][-1]
    assert _output(by_version["2"]) == "done"
    assert "Resource temporarily unavailable" in _output(by_version["1"]), by_version["1"][-3:]
