"""The namespace zygote's host side without bwrap: its argv, its spawn message, replacement.

runner/backends/namespace/zygoteargs.py (flag by flag), zygote.py (what a spawn carries: never
a run's data), zygotes.py (a zygote that ends before answering is replaced once, a second loss
is the sandbox's infrastructure error). The isolation itself is proven in real sandboxes:
tests/integration/conformance (the ``namespace`` entry), test_attacks_zygote.py,
test_namespace_zygote_lifecycle.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.backends.base import Mount, SandboxSpec
from runner.backends.namespace.zygote import SpawnRequest, ZygoteGone
from runner.backends.namespace.zygoteargs import runtime_mounts, zygote_argv
from runner.backends.namespace.zygotes import ZygoteKey, Zygotes
from runner.episode.prepare import RUNTIME_COMMAND
from runner.errors import InfrastructureError
from runner.wire.zygote import CGROUP_DIR, RUNTIME_ARGV, TEMPLATE_ROOT, ZYGOTE_FLAG


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    for folder in ("usr/bin", "etc", "opt/sandbox-replay", "sys", "tmp", "dev", "proc"):
        (root / folder).mkdir(parents=True)
    (root / "bin").symlink_to("usr/bin")
    return root


def _spec(*mounts: Mount) -> SandboxSpec:
    return SandboxSpec(run_id="r1", image="img", command=RUNTIME_ARGV, mounts=mounts, init=True)


def _ops(argv: list[str], flag: str, arity: int) -> list[tuple[str, ...]]:
    return [tuple(argv[i + 1 : i + 1 + arity]) for i, a in enumerate(argv) if a == flag]


def test_the_runtime_command_is_the_one_the_zygote_forks() -> None:
    assert tuple(RUNTIME_COMMAND) == RUNTIME_ARGV


def test_the_zygotes_own_sandbox_is_a_runs_but_lets_children_make_namespaces(tree: Path) -> None:
    argv = zygote_argv("bwrap", _spec(), tree, control_fd=7)
    head = argv[: argv.index("--")]
    for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"):
        assert flag in head
    assert "--as-pid-1" in head  # its children's PID namespaces die with it
    assert head[head.index("--cap-drop") + 1] == "ALL"
    # each child makes its own namespaces and loads the filter itself (runtime/zygote/isolate.py)
    assert "--disable-userns" not in head and "--seccomp" not in head
    assert "--share-net" not in head
    assert argv[argv.index("--") + 1 :] == [*RUNTIME_ARGV, ZYGOTE_FLAG, "7"]
    assert head[-4:] == ["--remount-ro", "/", "--chdir", "/"]


def test_the_runs_root_is_the_image_and_the_mounts_under_the_template(
    tree: Path, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    bases = {"memory": Path("/sys/fs/cgroup/memory/x"), "pids": Path("/sys/fs/cgroup/pids/x")}
    argv = zygote_argv(
        "bwrap", _spec(Mount(tools, "/sandbox/tools/0")), tree, control_fd=3, cgroup_bases=bases
    )
    binds = _ops(argv, "--ro-bind", 2)
    dirs = {d for (d,) in _ops(argv, "--dir", 1)}
    # the image's entries twice: the zygote's own root and the runs' (template) root
    assert (str(tree / "usr"), "/usr") in binds
    assert (str(tree / "usr"), f"{TEMPLATE_ROOT}/usr") in binds
    assert ("usr/bin", f"{TEMPLATE_ROOT}/bin") in _ops(argv, "--symlink", 2)
    # the run's mount in both; the runtime's packages in the zygote's own view only
    assert (str(tools), "/sandbox/tools/0") in binds
    assert (str(tools), f"{TEMPLATE_ROOT}/sandbox/tools/0") in binds
    for mount in runtime_mounts():
        assert (str(mount.source), mount.target) in binds
        assert (str(mount.source), TEMPLATE_ROOT + mount.target) not in binds
    # what each child mounts itself exists empty in the template, never from the image
    assert {f"{TEMPLATE_ROOT}/proc", f"{TEMPLATE_ROOT}/tmp"} <= dirs
    assert (str(tree / "proc"), f"{TEMPLATE_ROOT}/proc") not in binds
    assert f"{TEMPLATE_ROOT}/dev" in {d for (d,) in _ops(argv, "--dev", 1)}
    assert f"{TEMPLATE_ROOT}/dev" in {d for (d,) in _ops(argv, "--remount-ro", 1)}
    assert {f"{TEMPLATE_ROOT}/sys/fs/cgroup/memory", f"{TEMPLATE_ROOT}/sys/fs/cgroup/pids"} <= dirs
    # the host's groups, read-only, where children bind their own run's folder from
    assert (str(bases["memory"]), f"{CGROUP_DIR}/memory") in binds
    assert all(not b[1].startswith(CGROUP_DIR) for b in _ops(argv, "--bind", 2))


def test_a_relative_mount_target_is_refused(tree: Path) -> None:
    with pytest.raises(InfrastructureError, match="absolute"):
        zygote_argv("bwrap", _spec(Mount(tree, "relative/x")), tree, control_fd=3)


def test_a_runtime_spawn_carries_numbers_and_a_random_group_never_a_run() -> None:
    """What the zygote learns of a run: the keys of ``spawn`` are exactly these (docstring of
    runner/runtime/zygote/__init__.py); the runtime's argv and environment are its own."""
    message = SpawnRequest(cap_s=70, tmpfs_bytes=1 << 20, group="zg-" + "a" * 24).message(3)
    assert set(message) == {
        "op", "seq", "cap_s", "idle_cap_s", "tmpfs_bytes", "rlimits", "group", "argv", "env"
    }  # fmt: skip
    assert message["argv"] is None and message["env"] is None
    assert message["seq"] == 3 and message["op"] == "spawn"


class _Zygote:
    """A stand-in zygote: answers, or is gone before answering."""

    made = 0

    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = outcomes
        self.alive = True
        self.busy = False
        self.closed = False
        self.pid = None
        self.name = f"z{_Zygote.made}"
        _Zygote.made += 1

    def start(self) -> None:
        if self.outcomes and self.outcomes[0] == "no-start":
            self.outcomes.pop(0)
            raise InfrastructureError("bwrap could not set up the sandbox's namespace zygote")

    def spawn(self, request: SpawnRequest) -> Any:
        outcome = self.outcomes.pop(0)
        if outcome == "gone":
            self.alive = False
            raise ZygoteGone("the namespace zygote ended (exit -9)")
        return ("child", self.name, request.cap_s)

    def close(self) -> None:
        self.closed = True


def _key(name: str = "k") -> ZygoteKey:
    return ZygoteKey(tree=name, mounts=(), user="10001:10001", workdir="/tmp", env=())


def test_a_zygote_gone_before_answering_is_replaced_and_the_spawn_asked_again() -> None:
    outcomes = ["ok", "gone", "ok"]
    made: list[_Zygote] = []

    def make(key: ZygoteKey) -> Any:
        made.append(_Zygote(outcomes))
        return made[-1]

    zygotes = Zygotes(make)
    requests = []

    def request() -> SpawnRequest:
        requests.append(SpawnRequest(cap_s=len(requests) + 1, tmpfs_bytes=1))
        return requests[-1]

    assert zygotes.spawn(_key(), request)[1] == made[0].name  # started on first use
    assert zygotes.spawn(_key(), request) == ("child", made[1].name, 3)  # a fresh request
    assert len(made) == 2 and made[0].closed and zygotes.started == 2
    assert len(requests) == 3  # one per attempt: each consumed its descriptors


def test_two_zygotes_lost_in_a_row_are_the_sandboxs_infrastructure_error() -> None:
    outcomes = ["gone", "gone"]
    zygotes = Zygotes(lambda key: _Zygote(outcomes))  # type: ignore[arg-type,return-value]
    with pytest.raises(InfrastructureError, match="no namespace zygote could start"):
        zygotes.spawn(_key(), lambda: SpawnRequest(cap_s=1, tmpfs_bytes=1))


def test_a_zygote_that_cannot_start_is_not_kept_and_the_error_says_why() -> None:
    outcomes = ["no-start", "ok"]
    zygotes = Zygotes(lambda key: _Zygote(outcomes))  # type: ignore[arg-type,return-value]
    with pytest.raises(InfrastructureError, match="could not set up"):
        zygotes.spawn(_key(), lambda: SpawnRequest(cap_s=1, tmpfs_bytes=1))
    assert zygotes.spawn(_key(), lambda: SpawnRequest(cap_s=2, tmpfs_bytes=1))[2] == 2


def test_idle_zygotes_beyond_the_bound_are_closed_busy_ones_never() -> None:
    made: dict[str, _Zygote] = {}

    def make(key: ZygoteKey) -> Any:
        made[key.tree] = _Zygote(["ok"] * 3)
        return made[key.tree]

    zygotes = Zygotes(make)
    for index in range(7):  # k0 busy, k6 new: five idle others, one beyond MOST_IDLE
        zygotes.spawn(_key(f"k{index}"), lambda: SpawnRequest(cap_s=1, tmpfs_bytes=1))
        if index == 0:
            made["k0"].busy = True  # a sandbox of it still runs
    assert not made["k0"].closed  # busy: kept beyond the bound
    assert made["k1"].closed and not made["k2"].closed  # the oldest idle one went
    zygotes.close()
    assert all(z.closed for z in made.values())
    with pytest.raises(InfrastructureError, match="closed"):
        zygotes.spawn(_key(), lambda: SpawnRequest(cap_s=1, tmpfs_bytes=1))
