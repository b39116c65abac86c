"""The namespace backend's records and reaper: dead owners only, cgroups only under our groups."""

from __future__ import annotations

import json
from pathlib import Path

from runner.backends import labels as L
from runner.backends.namespace.records import reap_records, write_record

HOST = "h" * 16


def _labels(pid: int, *, ledger: str | None = None) -> dict[str, str]:
    owner = L.Owner(HOST, pid, "1")
    made = L.sandbox_labels(
        session_id="s1", run_id=f"run-{pid}", owner=owner, version="0", extra={}
    )
    if ledger is not None:
        made[L.LEDGER] = ledger
    return made


def _dead_pid() -> int:
    return 2**22 - 3  # above pid_max's default range: no such process


def test_a_dead_owners_sandbox_is_reaped_and_charged_at_most_its_cap(tmp_path: Path) -> None:
    base = tmp_path / "cg" / "sandbox-replay"
    (base / "box").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    record = {
        "labels": _labels(_dead_pid()),
        "started": 1000.0,
        "cap_s": 30.0,
        "cgroups": [str(base / "box"), str(outside)],
    }
    write_record(tmp_path / "sandboxes", "box", record)
    reaped = reap_records(tmp_path / "sandboxes", HOST, [base], clock=lambda: 5000.0)
    assert [(r.name, r.run_id, r.sandbox_s) for r in reaped] == [
        ("box", f"run-{_dead_pid()}", 30.0)
    ]
    assert not (base / "box").exists()  # its group went
    assert outside.exists()  # a folder outside our groups is never removed, whatever it says
    assert list((tmp_path / "sandboxes").iterdir()) == []


def test_a_live_owner_and_another_hosts_sandbox_are_kept(tmp_path: Path) -> None:
    import os

    write_record(tmp_path / "s", "live", {"labels": _labels(os.getpid()), "started": 1.0})
    other = _labels(_dead_pid())
    other[L.OWNER_HOST] = "x" * 16
    other[L.OWNER] = f"{'x' * 16}:{_dead_pid()}:1"
    write_record(tmp_path / "s", "other", {"labels": other, "started": 1.0})
    assert reap_records(tmp_path / "s", HOST, []) == []
    assert sorted(p.stem for p in (tmp_path / "s").iterdir()) == ["live", "other"]


def test_another_ledgers_recent_sandbox_is_left_to_it(tmp_path: Path) -> None:
    record = {"labels": _labels(_dead_pid(), ledger="theirs"), "started": 1000.0}
    write_record(tmp_path / "s", "foreign", record)
    assert reap_records(tmp_path / "s", HOST, [], ledger="ours", clock=lambda: 2000.0) == []
    reaped = reap_records(tmp_path / "s", HOST, [], ledger="ours", clock=lambda: 1000.0 + 2 * 86400)
    assert [r.name for r in reaped] == ["foreign"]


def test_a_malformed_or_oversized_record_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "bad.json").write_text("{not json")
    (folder / "big.json").write_text(json.dumps({"labels": {}, "pad": "x" * 70_000}))
    assert reap_records(folder, HOST, []) == []
    assert list(folder.iterdir()) == []
