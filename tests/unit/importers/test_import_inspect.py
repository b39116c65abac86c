"""`import inspect`: Inspect AI logs become traces; the .eval archive is read as hostile input.

``tests/fixtures/import/inspect/arith.eval`` was written by inspect-ai 0.3.285 itself, offline,
with its ``mockllm/model`` provider (``make_log.py`` beside it, run under ``unshare -n``): two
samples, a tool call, a tool that raised (``ToolError``), a final answer each; Zstandard
members, as Inspect writes them. One test writes a fresh log the same way when inspect-ai is
installed (the optional extra ``inspect-tests``) and imports it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from runner.errors import InputError
from runner.importers.inspectlog import read_inspect
from runner.importers.output import write_import
from runner.importers.ziplog import MAX_MEMBER_BYTES, ZipLog
from tests.support.tracelines import resolved_lines

FIXTURE = Path(__file__).parents[2] / "fixtures" / "import" / "inspect"


def _traces(out: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.stem: resolved_lines(p) for p in sorted((out / "traces").glob("*.jsonl"))}


def _check_arith(out: Path, report: dict[str, Any]) -> None:
    traces = _traces(out)
    assert sorted(traces) == ["arith-add-1", "arith-pop-1"]
    add = traces["arith-add-1"]
    assert add[0]["task_input"] == {"message": "What is 2 + 3?"}
    calls = [x for x in add if x["type"] == "call"]
    assert [c["tool"] for c in calls] == ["model", "add", "model"]
    assert calls[1]["args"] == {"x": 2, "y": 3} and calls[1]["body"] == "5"
    assert calls[0]["model"] == "mockllm/model" and calls[0]["model_source"] == "response"
    assert calls[0]["usage"] == {"prompt_tokens": 101, "completion_tokens": 11}
    assert add[-1]["status"] == "succeeded" and add[-1]["output"] == "The answer is 5."
    pop = [x for x in traces["arith-pop-1"] if x["type"] == "call"]
    assert [c["tool"] for c in pop] == ["model", "lookup", "model", "lookup", "model"]
    assert pop[1]["error"] == {"class": "unknown", "message": "unknown city: Atlantis"}
    assert pop[3]["body"] == "2.1 million" and "error" not in pop[3]
    tasks = [json.loads(x) for x in (out / "tasks.jsonl").read_text("utf-8").splitlines()]
    assert {t["task_id"]: t.get("expected") for t in tasks}["arith-add-1"] == {
        "output_contains": "5"
    }
    assert report["tool_errors"] == 1 and report["calls"]["model"] == 5


def test_an_eval_log_imports(tmp_path: Path) -> None:
    report = write_import(read_inspect(FIXTURE / "arith.eval"), tmp_path / "out", {})
    _check_arith(tmp_path / "out", report)


def test_a_json_log_imports_alike(tmp_path: Path) -> None:
    with ZipLog(FIXTURE / "arith.eval") as log:
        header = json.loads(log.read("header.json"))
        samples = [json.loads(log.read(n)) for n in log.names if n.startswith("samples/")]
    path = tmp_path / "arith.json"
    path.write_text(json.dumps({**header, "samples": samples}), encoding="utf-8")
    report = write_import(read_inspect(path), tmp_path / "out", {})
    _check_arith(tmp_path / "out", report)


def test_a_fresh_log_written_by_inspect_offline_imports(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai", reason="optional extra inspect-tests not installed")
    if shutil.which("unshare") is None:
        pytest.skip("unshare is needed to write the log with no network")
    shutil.copy(FIXTURE / "make_log.py", tmp_path)
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "make_log.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no network namespace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0 and done.stdout.strip().endswith("success"), done.stderr[-2000:]
    (log,) = (tmp_path / "logs").glob("*.eval")
    report = write_import(read_inspect(log), tmp_path / "out", {})
    _check_arith(tmp_path / "out", report)


def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _header() -> bytes:
    return json.dumps({"eval": {"task": "t", "model": "m"}}).encode()


def test_a_zip_bomb_is_refused_before_it_inflates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 1 << 20  # the real bound is MAX_MEMBER_BYTES (256 MiB); the rule is the same
    assert limit < MAX_MEMBER_BYTES
    monkeypatch.setattr("runner.importers.ziplog.MAX_MEMBER_BYTES", limit)
    path = _zip(tmp_path / "bomb.eval", {"header.json": _header(), "samples/a.json": b"0"})
    # make the member inflate to far more than it declares: rewrite its compressed bytes
    big = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = big.compress(b" " * (8 * limit)) + big.flush()
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("samples/a.json")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    tail = raw[start + info.compress_size :]
    data = raw[:start] + payload + tail
    # the central directory still says 1 byte; shift its offset by the growth
    growth = len(payload) - info.compress_size
    cd = data.rfind(b"PK\x05\x06")
    offset = int.from_bytes(data[cd + 16 : cd + 20], "little") + growth
    data = data[: cd + 16] + offset.to_bytes(4, "little") + data[cd + 20 :]
    size_field = data.find(b"PK\x01\x02", start + len(payload))
    while size_field != -1:  # fix each central entry's offset after the member
        name_len = int.from_bytes(data[size_field + 28 : size_field + 30], "little")
        name = data[size_field + 46 : size_field + 46 + name_len]
        if name == b"samples/a.json":
            csize = len(payload).to_bytes(4, "little")
            data = data[: size_field + 20] + csize + data[size_field + 24 :]
        size_field = data.find(b"PK\x01\x02", size_field + 4)
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        read_inspect(path)
    assert "samples/a.json" in str(caught.value)
    assert "inflates" in str(caught.value) or "declares" in str(caught.value)


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        ({"../evil.json": b"{}"}, "not a plain relative path"),
        ({"/abs.json": b"{}"}, "not a plain relative path"),
        ({"header.json": b'{"a": 1, "a": 2}', "samples/x.json": b"{}"}, "invalid JSON"),
        ({"header.json": _header(), "samples/x.json": b"[]"}, "a sample without 'messages'"),
        ({"header.json": _header()}, "no samples"),
    ],
)
def test_hostile_archives_are_refused_naming_the_member(
    tmp_path: Path, members: dict[str, bytes], problem: str
) -> None:
    path = _zip(tmp_path / "h.eval", members)
    with pytest.raises(InputError) as caught:
        read_inspect(path)
    assert problem in str(caught.value)


def test_a_corrupt_member_fails_its_crc(tmp_path: Path) -> None:
    path = _zip(tmp_path / "c.eval", {"header.json": _header()}, zipfile.ZIP_STORED)
    data = bytearray(path.read_bytes())
    at = data.find(b'"task"')
    data[at + 1] = ord("T")
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as caught:
        read_inspect(path)
    assert "CRC" in str(caught.value)


def test_neither_an_archive_nor_a_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(InputError) as caught:
        read_inspect(path)
    assert "neither an .eval archive nor a JSON log" in str(caught.value)
