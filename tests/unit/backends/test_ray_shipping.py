"""Mount sources shipped to Ray nodes as content-addressed blobs (runner/backends/ray/shipping.py).

The module is standard library only (no ray needed): packing is deterministic (no times,
owners or host paths in the bytes), links are refused, unpacking verifies the digest first and
publishes a readable copy atomically.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from runner.backends.ray import shipping
from runner.errors import InfrastructureError


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("X = 1\n", encoding="utf-8")
    (root / "run.json").write_text("{}\n", encoding="utf-8")
    (root / "tool.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (root / "tool.sh").chmod(0o700)
    return root


def test_equal_content_packs_to_equal_bytes_whatever_the_times_and_paths(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a")
    b = _tree(tmp_path / "elsewhere" / "b")
    os.utime(b / "run.json", (1, 1))
    first, second = shipping.pack(a), shipping.pack(b)
    assert first.data == second.data
    assert first.digest == hashlib.sha256(first.data).hexdigest() == second.digest
    (b / "run.json").write_text('{"x": 1}\n', encoding="utf-8")
    assert shipping.pack(b).digest != first.digest


def test_unpack_verifies_then_publishes_a_readable_copy(tmp_path: Path) -> None:
    blob = shipping.pack(_tree(tmp_path / "src"))
    cache = tmp_path / "cache"
    folder = shipping.unpack(cache, blob.digest, blob.data)
    assert folder == shipping.unpacked_path(cache, blob.digest, False)
    assert (folder / "pkg" / "mod.py").read_text(encoding="utf-8") == "X = 1\n"
    assert (folder / "tool.sh").stat().st_mode & 0o777 == 0o755
    assert (folder / "run.json").stat().st_mode & 0o777 == 0o644
    assert shipping.is_unpacked(cache, blob.digest)
    assert shipping.unpack(cache, blob.digest, blob.data) == folder  # once per node
    assert not [p for p in cache.iterdir() if p.name.startswith(".unpack-")]


def test_bytes_that_do_not_match_their_digest_are_refused(tmp_path: Path) -> None:
    blob = shipping.pack(_tree(tmp_path / "src"))
    with pytest.raises(InfrastructureError, match="other content"):
        shipping.unpack(tmp_path / "cache", blob.digest, blob.data + b"\0")
    with pytest.raises(InfrastructureError, match="sha256"):
        shipping.unpack(tmp_path / "cache", "../etc", blob.data)
    assert not (tmp_path / "cache").exists()


def test_a_link_is_refused_when_packing_and_when_unpacking(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    (src / "escape").symlink_to("/etc/passwd")
    with pytest.raises(InfrastructureError, match="regular files"):
        shipping.pack(src)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("escape")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    data = buffer.getvalue()
    with pytest.raises(InfrastructureError, match="not a file"):
        shipping.unpack(tmp_path / "cache", hashlib.sha256(data).hexdigest(), data)


def test_a_file_mount_travels_as_one_member(tmp_path: Path) -> None:
    source = tmp_path / "__init__.py"
    source.write_text("VERSION = '1'\n", encoding="utf-8")
    blob = shipping.pack(source)
    assert blob.is_file
    shipping.unpack(tmp_path / "cache", blob.digest, blob.data)
    path = shipping.unpacked_path(tmp_path / "cache", blob.digest, True)
    assert path.read_text(encoding="utf-8") == "VERSION = '1'\n"


def test_the_fingerprint_changes_with_the_content_listing(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    before = shipping.fingerprint(src)
    assert shipping.fingerprint(src) == before
    (src / "pkg" / "new.py").write_text("", encoding="utf-8")
    assert shipping.fingerprint(src) != before


def test_long_unused_blobs_are_evicted_and_used_ones_kept(tmp_path: Path) -> None:
    import os

    from runner.backends.ray import shipping

    cache = tmp_path / "cache"
    old_src, new_src = tmp_path / "old", tmp_path / "new"
    old_src.mkdir()
    new_src.mkdir()
    (old_src / "a.py").write_text("A = 1\n")
    (new_src / "b.py").write_text("B = 2\n")
    old, new = shipping.pack(old_src), shipping.pack(new_src)
    shipping.unpack(cache, old.digest, old.data)
    shipping.unpack(cache, new.digest, new.data)
    now = 1_000_000_000.0
    day = shipping.UNUSED_BLOB_S
    os.utime(cache / old.digest, (now - day - 60, now - day - 60))
    os.utime(cache / new.digest, (now - day + 60, now - day + 60))
    assert shipping.evict_unused(cache, now=now) == 1
    assert not shipping.is_unpacked(cache, old.digest)
    assert shipping.is_unpacked(cache, new.digest)
    # a use stamps the blob: evicting "a day after now" keeps nothing but what was just used
    shipping.mark_used(cache, new.digest)
    assert shipping.evict_unused(cache, now=now) == 0 and shipping.is_unpacked(cache, new.digest)
    assert (cache / ".lock").is_file()  # the lock file is not a blob and stays
