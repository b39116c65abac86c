"""The bwrap argv of a namespace sandbox, flag by flag (runner.backends.namespace.bwrapargs)."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest

from runner.backends.base import Mount, ResourceLimits, SandboxSpec
from runner.backends.namespace.bwrapargs import bwrap_argv
from runner.backends.namespace.launcher import Staging, launcher_argv, launcher_preexec, rlimits
from runner.errors import InfrastructureError


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for folder in ("usr/bin", "etc", "opt/sandbox-replay", "sandbox/run", "tmp", "dev", "proc"):
        (root / folder).mkdir(parents=True)
    (root / "bin").symlink_to("usr/bin")
    (root / "opt" / "other").mkdir()
    return root


def _spec(**kwargs: object) -> SandboxSpec:
    return SandboxSpec(run_id="r1", image="img", command=("python3", "-c", "pass"), **kwargs)  # type: ignore[arg-type]


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_every_namespace_and_hardening_flag_is_there(tree: Path) -> None:
    argv = bwrap_argv("bwrap", _spec(init=True), tree, hostname="sandbox")
    head = argv[: argv.index("--")]
    for flag in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
    ):
        assert flag in head
    assert "--share-net" not in head
    assert head[head.index("--cap-drop") + 1] == "ALL"
    assert (head[head.index("--uid") + 1], head[head.index("--gid") + 1]) == ("10001", "10001")
    assert argv[argv.index("--") + 1 :] == ["python3", "-c", "pass"]  # init: as it is, PID 1
    assert head[-4:] == ["--remount-ro", "/", "--chdir", "/tmp"]


def test_a_command_that_is_not_init_runs_under_the_lifetime_cap(tree: Path) -> None:
    argv = bwrap_argv("bwrap", _spec(), tree, hostname="sandbox")
    command = argv[argv.index("--") + 1 :]
    assert command[:2] == ["/bin/sh", "-c"] and command[-3:] == ["python3", "-c", "pass"]


def test_the_image_is_bound_read_only_around_the_mount_points(tree: Path, tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    spec = _spec(
        mounts=(
            Mount(tools, "/opt/sandbox-replay/runner/sdk"),
            Mount(tools, "/sandbox/run"),
            Mount(tools, "/sandbox/out", read_only=False),
        ),
        limits=ResourceLimits(tmpfs_mb=8),
    )
    argv = bwrap_argv("bwrap", spec, tree, hostname="sandbox")
    binds = dict((dest, src) for src, dest in _pairs(argv, "--ro-bind"))
    assert binds["/usr"] == str(tree / "usr") and binds["/etc"] == str(tree / "etc")
    assert binds["/opt/other"] == str(tree / "opt/other")  # one level down, beside a mount
    assert "/opt" not in binds and "/sandbox" not in binds and "/tmp" not in binds
    assert binds["/opt/sandbox-replay/runner/sdk"] == str(tools)
    assert binds["/sandbox/run"] == str(tools)
    assert _pairs(argv, "--bind") == [(str(tools), "/sandbox/out")]  # the visible opt-in
    assert ("usr/bin", "/bin") in _pairs(argv, "--symlink")
    dirs = [argv[i + 1] for i, a in enumerate(argv) if a == "--dir"]
    assert dirs == ["/opt", "/opt/sandbox-replay", "/sandbox"]
    tmpfs = [(argv[i - 3], argv[i - 1], argv[i + 1]) for i, a in enumerate(argv) if a == "--tmpfs"]
    assert tmpfs == [("1777", str(8 * 1024 * 1024), "/dev/shm"), ("1777", str(8 << 20), "/tmp")]


def test_a_mount_under_a_symlink_of_the_image_or_relative_is_refused(tree: Path) -> None:
    with pytest.raises(InfrastructureError, match="symlink"):
        bwrap_argv("bwrap", _spec(mounts=(Mount(tree, "/bin/x"),)), tree, hostname="s")
    with pytest.raises(InfrastructureError, match="absolute"):
        bwrap_argv("bwrap", _spec(mounts=(Mount(tree, "/sandbox/../etc"),)), tree, hostname="s")


def test_the_cgroup_folders_are_shown_read_only(tree: Path, tmp_path: Path) -> None:
    argv = bwrap_argv("bwrap", _spec(), tree, hostname="s", cgroup_dirs={"cpu": tmp_path})
    assert (str(tmp_path), "/sys/fs/cgroup/cpu") in _pairs(argv, "--ro-bind")


def test_the_rlimit_launcher_uses_no_shell_builtin_and_sets_setrlimit_values() -> None:
    argv = launcher_argv(None, None)
    assert argv[:2] == ["/bin/sh", "-c"]
    assert "ulimit" not in argv[2]  # dash has no ulimit -u
    assert argv[2] == 'exec setpriv --pdeathsig KILL -- "$@"'  # not root: no uid change
    bare = launcher_argv(None, None, setpriv=False)
    assert bare[2] == 'exec "$@"'
    values = rlimits(ResourceLimits(memory_mb=64, pids_limit=16))
    assert values == {resource.RLIMIT_AS: 64 * 1024 * 1024, resource.RLIMIT_NPROC: 16}


def test_the_launchers_rlimits_hold_in_what_it_runs_under_dash() -> None:
    """The preexec sets them before the shell; the exec'd program has them (any POSIX sh)."""
    argv = [*launcher_argv(None, None, setpriv=False), "sh", "-c", "ulimit -v; ulimit -n"]
    shell = "/bin/dash" if Path("/bin/dash").exists() else "/bin/sh"
    argv[0] = shell
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
        preexec_fn=launcher_preexec(ResourceLimits(memory_mb=64, pids_limit=16)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == str(64 * 1024)  # KiB of address space
    nproc = subprocess.run(
        [shell, "-c", "cat /proc/self/limits"],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=launcher_preexec(ResourceLimits(memory_mb=64, pids_limit=16)),
    ).stdout
    assert [line.split()[-3:-1] for line in nproc.splitlines() if "processes" in line] == [
        ["16", "16"]
    ]


def test_as_root_unreachable_sources_are_staged_and_bwrap_drops_to_the_sandbox_uid(
    tmp_path: Path,
) -> None:
    hidden = tmp_path / "private"
    (hidden / "tools").mkdir(parents=True)
    hidden.chmod(0o700)
    open_one = Path("/usr/lib")  # every folder above it is searchable by anyone
    staging = Staging([open_one, hidden / "tools"], "10001", "10001")
    assert staging.roots == [hidden / "tools"]  # the open folder is bound where it is
    assert staging.seen_as(hidden / "tools" / "a.py") == "/mnt/0/a.py"
    assert staging.seen_as(open_one) == str(open_one)
    argv = launcher_argv(None, staging)
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert "setpriv --pdeathsig KILL --reuid=10001 --regid=10001 --clear-groups" in argv[6]
    assert argv[-2:] == ["1", str(hidden / "tools")]
