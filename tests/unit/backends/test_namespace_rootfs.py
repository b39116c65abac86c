"""The namespace backend's image tar is hostile input: no escapes, no device nodes, bounded."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from runner.backends.namespace.rootfs import (
    HOSTS,
    RootFs,
    ensure_hosts,
    extract_rootfs,
    sweep_partials,
)
from runner.errors import InfrastructureError


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            archive.addfile(info, io.BytesIO(data) if info.isfile() else None)
    buffer.seek(0)
    return buffer


def _file(name: str, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_a_plain_tree_is_unpacked_with_setuid_and_other_write_cleared(tmp_path: Path) -> None:
    d = tarfile.TarInfo("usr")
    d.type, d.mode = tarfile.DIRTYPE, 0o755
    stream = _tar(
        (d, b""),
        (_file("usr/tool", 0o4777), b"#!x"),
        (_link("bin", "usr"), b""),
        (_link("etc-link", "/etc/passwd"), b""),  # absolute: resolved inside the sandbox
    )
    extract_rootfs(stream, tmp_path / "tree")
    tool = tmp_path / "tree" / "usr" / "tool"
    assert tool.read_bytes() == b"#!x"
    assert tool.stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "tree" / "bin").is_symlink()


def test_device_nodes_and_fifos_are_skipped(tmp_path: Path) -> None:
    dev = tarfile.TarInfo("dev/sda")
    dev.type, dev.devmajor, dev.devminor = tarfile.BLKTYPE, 8, 0
    null = tarfile.TarInfo("dev/null")
    null.type, null.devmajor, null.devminor = tarfile.CHRTYPE, 1, 3
    fifo = tarfile.TarInfo("fifo")
    fifo.type = tarfile.FIFOTYPE
    extract_rootfs(_tar((dev, b""), (null, b""), (fifo, b""), (_file("ok"), b"1")), tmp_path / "t")
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == ["ok"]


@pytest.mark.parametrize(
    "members",
    [
        [(_file("../escape"), b"x")],
        [(_link("up", "/"), b""), (_file("up/tmp/escape-through-link"), b"x")],
        [(_link("hard", "../../etc/passwd", tarfile.LNKTYPE), b"")],
    ],
    ids=["dotdot", "through-symlink", "hardlink-outside"],
)
def test_nothing_is_written_outside_the_tree(tmp_path: Path, members: list) -> None:
    with pytest.raises(InfrastructureError):
        extract_rootfs(_tar(*members), tmp_path / "tree")
    assert not (tmp_path / "escape").exists()
    assert not (tmp_path / "tree").exists()  # a refused tree is removed


def test_too_many_members_or_bytes_are_refused(tmp_path: Path) -> None:
    many = _tar(*[(_file(f"f{i}"), b"") for i in range(5)])
    with pytest.raises(InfrastructureError, match="exceeds"):
        extract_rootfs(many, tmp_path / "a", max_members=4)
    big = _tar((_file("big"), b"x" * 100))
    with pytest.raises(InfrastructureError, match="exceeds"):
        extract_rootfs(big, tmp_path / "b", max_bytes=99)


def test_a_folder_without_usr_is_not_a_root_filesystem(tmp_path: Path) -> None:
    with pytest.raises(InfrastructureError, match="not a root filesystem"):
        RootFs.from_folder(tmp_path)
    (tmp_path / "usr").mkdir()
    assert RootFs.from_folder(tmp_path).image_id == f"dir:{tmp_path}"


def test_stale_partial_extractions_are_swept(tmp_path: Path) -> None:
    (tmp_path / ".partial-old").mkdir()
    (tmp_path / "sha256-abc").mkdir()
    assert sweep_partials(tmp_path, now=10**12) == [tmp_path / ".partial-old"]
    assert [p.name for p in tmp_path.iterdir()] == ["sha256-abc"]


def test_an_empty_hosts_file_gets_dockers_and_a_real_one_stays(tmp_path: Path) -> None:
    """Docker writes /etc/hosts into each container; an exported tree has the empty placeholder."""
    tree = tmp_path / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "hosts").write_text("")
    assert ensure_hosts(tree) is True
    assert (tree / "etc" / "hosts").read_text() == HOSTS
    assert "127.0.0.1\tlocalhost" in HOSTS
    (tree / "etc" / "hosts").write_text("10.0.0.1 own\n")
    assert ensure_hosts(tree) is False
    assert (tree / "etc" / "hosts").read_text() == "10.0.0.1 own\n"


def test_hosts_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "etc").symlink_to(outside)
    assert ensure_hosts(tree) is False and not (outside / "hosts").exists()
    (tree / "etc").unlink()
    (tree / "etc").mkdir()
    (tree / "etc" / "hosts").symlink_to(outside / "target")
    assert ensure_hosts(tree) is False and not (outside / "target").exists()
