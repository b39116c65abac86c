"""Which parts of a tool root the sandbox must not see (runner/orchestrator/hidden.py)."""

from __future__ import annotations

from pathlib import Path

from runner.orchestrator.hidden import hidden_mounts


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (root / ".aws").mkdir()
    (root / "pkg").mkdir()
    (root / "pkg" / ".env").write_text("nested\n")
    (root / "tools.py").write_text("x = 1\n")
    (root / ".link").symlink_to(root / ".env")
    return root


def test_dot_entries_and_the_state_folder_are_covered_once(tmp_path: Path) -> None:
    root = _project(tmp_path)
    state = root / ".sandbox-replay"
    run_dir = state / "runs" / "r1"
    run_dir.mkdir(parents=True)
    other = tmp_path / "lib"
    (other / ".cache").mkdir(parents=True)
    mounts = hidden_mounts(state, run_dir, [root, other], ["/sandbox/tools/0", "/sandbox/tools/1"])
    by_target = {m.target: m for m in mounts}
    assert len(by_target) == len(mounts)  # one mount per target: the state folder is a dot entry
    assert set(by_target) == {
        "/sandbox/tools/0/.sandbox-replay",
        "/sandbox/tools/0/.git",
        "/sandbox/tools/0/.env",
        "/sandbox/tools/0/.aws",
        "/sandbox/tools/1/.cache",
    }  # not the symlink, not pkg/.env, not the modules
    empty_dir, empty_file = run_dir / "empty", run_dir / "empty-file"
    for target in ("/sandbox/tools/0/.git", "/sandbox/tools/0/.aws", "/sandbox/tools/1/.cache"):
        assert by_target[target].source == empty_dir
    assert by_target["/sandbox/tools/0/.env"].source == empty_file
    assert empty_dir.is_dir() and not any(empty_dir.iterdir())
    assert empty_file.is_file() and empty_file.read_bytes() == b""
    assert all(m.read_only for m in mounts)


def test_a_root_without_dot_entries_needs_no_mount(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "tools.py").write_text("x = 1\n")
    state = tmp_path / "state"
    run_dir = state / "runs" / "r1"
    run_dir.mkdir(parents=True)
    assert hidden_mounts(state, run_dir, [root], ["/sandbox/tools/0"]) == []
    assert not (run_dir / "empty").exists() and not (run_dir / "empty-file").exists()
