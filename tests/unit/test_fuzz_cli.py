"""Fuzz: mutated traces, task files, workflows, policies, import sources and packets through
the commands that need no Docker (Acceptance).

A few hundred cases are generated from the project's fixtures with a fixed seed (`SEED`): byte
flips, truncation, NUL and invalid UTF-8, deep nesting, huge strings, NaN/Infinity/1e400,
duplicate and unknown keys, wrong types, ``../`` ids, an unknown ``v``. Each runs in-process
(typer's CliRunner) in a fresh empty working folder. The oracle, for every case:

- the exit code is one of 0, 1, 2, 3, 5 (``reproduce`` and ``packet`` may also end at 6: they
  describe tools in a sandbox, so with no engine they stop when they ask for one, after every
  input check);
- it is 2 exactly when the input is invalid as decided *here*, independently of the product's
  readers: traces by docs/trace.schema.json plus the file rules of docs/trace-format.md and our
  own strict JSON check; task lines by SPEC.md's "Task file" and the id rules; YAML by PyYAML
  plus the limits (depth 100, finite numbers, no NUL). Where the independent check cannot
  decide (a YAML flip that changes the data: the models decide), only the other rules apply;
- an exit 2 names the file; no traceback ever; no case runs past `BOUND_S` seconds;
- the input files are unchanged (sha256) and nothing is written but the command's own output
  and the state folder in the working folder.

`test_fuzz_corpus_finds_nothing` runs them all; findings are listed with the case names.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import random
import re
import signal
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from runner.cli.app import app

jsonschema = pytest.importorskip("jsonschema")

SEED = 20261201
BOUND_S = 20
ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
SCHEMA = jsonschema.Draft202012Validator(json.loads((ROOT / "docs/trace.schema.json").read_text()))
DEPTH = 100  # stated in runner/trace/strictjson.py; the fuzzer's own copy of the rule
NO_ENGINE = {"SANDBOX_REPLAY_DOCKER_HOST": "unix:///nonexistent/sandbox-replay-fuzz.sock"}
# reproduce and packet describe tools in a sandbox: with no engine, valid input ends at 6
WITH_ENGINE = frozenset({0, 1, 2, 3, 5, 6})


# --- the independent decider -------------------------------------------------------------------


class _Bad(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Bad("duplicate key")
    return dict(pairs)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Bad("not finite")
    return value


def _const(name: str) -> Any:
    raise _Bad(name)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def json_ok(data: bytes) -> Any:
    """The value of strict JSON text, or raise `_Bad` (own code, not runner.trace.strictjson)."""
    try:
        text = data.decode("utf-8")
        value = json.loads(
            text, object_pairs_hook=_pairs, parse_float=_finite, parse_constant=_const
        )
        if _depth(value) > DEPTH:
            raise _Bad("too deep")
    except (ValueError, RecursionError) as exc:
        raise _Bad(str(exc)[:80]) from None
    return value


def trace_lines(data: bytes) -> list[dict[str, Any]]:
    """The lines of a readable trace, or raise `_Bad` (schema + docs/trace-format.md rules)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        raise _Bad("empty")
    records = []
    for raw in lines:
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        if not raw.strip():
            raise _Bad("blank line")
        record = json_ok(raw)
        if not isinstance(record, dict) or not SCHEMA.is_valid(record):
            raise _Bad("schema")
        records.append(record)
    kinds = [r["type"] for r in records]
    if kinds[0] != "run" or "run" in kinds[1:] or kinds[-1] != "end" or "end" in kinds[:-1]:
        raise _Bad("order")
    indices = [r["index"] for r in records if r["type"] == "call"]
    if any(b <= a for a, b in pairwise(indices)):
        raise _Bad("indices")
    return records


_ID_FORBIDDEN = set('/\\<>:"|?*')
_DEVICE = re.compile(r"^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$", re.IGNORECASE)


def id_ok(value: Any) -> bool:
    """docs/trace-format.md / SPEC.md id rules, written out again."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 128
        and not any(c in _ID_FORBIDDEN or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)
        and value not in (".", "..")
        and not value.startswith(" ")
        and not value.endswith((" ", "."))
        and not _DEVICE.match(value)
    )


def tasks_ok(data: bytes) -> bool:
    """SPEC.md "Task file" for the fixture's shape (task_id, input, expected.output)."""
    seen: set[str] = set()
    count = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            task = json_ok(raw)
        except _Bad:
            return False
        if not isinstance(task, dict) or not {"task_id", "input"} <= set(task):
            return False
        if set(task) - {"task_id", "input", "clock_start", "observations", "expected"}:
            return False
        if not id_ok(task["task_id"]) or task["task_id"].casefold() in seen:
            return False
        seen.add(task["task_id"].casefold())
        if not isinstance(task["input"], dict):
            return False
        expected = task.get("expected")
        if expected is not None and (
            not isinstance(expected, dict) or set(expected) - {"output", "output_contains"}
        ):
            return False
        count += 1
    return count > 0


def yaml_data(data: bytes) -> Any:
    """The YAML value, or raise `_Bad`: not UTF-8 or YAML, too deep, not finite."""
    try:
        value = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        raise _Bad(str(exc)[:80]) from None
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise _Bad("not finite")
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        if children and level + 1 > DEPTH:
            raise _Bad("too deep")
        stack.extend((c, level + 1) for c in children)
    return value


# --- mutations ---------------------------------------------------------------------------------


def flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(len(out))] = rng.choice(b'{}[]":,\\0aZ \n\x00\xff\x80')
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def insert(rng: random.Random, data: bytes, what: bytes) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + what + data[at:]


def nest(levels: int) -> Any:
    """A list nested ``levels`` deep (a marker that `dump` expands, past json's own limit)."""
    if levels > 500:
        return f"@@DEEP{levels}@@"
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def dump(record: Any) -> bytes:
    """One JSONL line of ``record``, deep markers expanded."""
    text = json.dumps(record)
    text = re.sub(r'"@@DEEP(\d+)@@"', lambda m: "[" * int(m[1]) + '"x"' + "]" * int(m[1]), text)
    return (text + "\n").encode()


BYTE_MUTATIONS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "flip": flip,
    "truncate": truncate,
    "nul": lambda r, d: insert(r, d, b"\x00"),
    "not-utf8": lambda r, d: insert(r, d, b"\xff\xfe"),
    "crlf": lambda r, d: d.replace(b"\n", b"\r\n"),
    "blank-line": lambda r, d: insert(r, d, b"\n\n") if d else d,
}


def json_mutations(rng: random.Random) -> dict[str, Callable[[dict[str, Any]], None]]:
    """Structured edits of one JSON record (applied to a copy)."""
    big = "x" * rng.choice([1000, 300_000, 2_000_000])
    return {
        "deep-150": lambda r: r.__setitem__(rng.choice(list(r)), nest(150)),
        "deep-1200": lambda r: r.__setitem__(rng.choice(list(r)), nest(1200)),
        "huge-string": lambda r: r.__setitem__(rng.choice(list(r)), big),
        "wrong-type": lambda r: r.__setitem__(rng.choice(list(r)), rng.choice([[], 7, None, {}])),
        "unknown-key": lambda r: r.__setitem__("zz_unknown", 1),
        "dotdot-id": lambda r: r.__setitem__(
            "run_id" if "run_id" in r else "task_id", rng.choice(["../evil", "a/b", "..", "CON"])
        ),
        "unknown-v": lambda r: r.__setitem__("v", 2),
        "drop-key": lambda r: r.pop(rng.choice(list(r))),
    }


NON_JSON = ["NaN", "Infinity", "-Infinity", "1e400"]


def textual(rng: random.Random, line: bytes) -> bytes:
    """Edits json.dumps cannot make: a non-JSON number, a duplicated key."""
    if rng.random() < 0.5:
        numbers = [m for m in re.finditer(rb"(?<=[:,\[])\s*-?\d+(\.\d+)?", line)]
        if numbers:
            m = rng.choice(numbers)
            return line[: m.start()] + rng.choice(NON_JSON).encode() + line[m.end() :]
    return line.replace(b"{", b'{"dup": 1, "dup": 2, ', 1)


# --- running one case --------------------------------------------------------------------------


@dataclass
class Case:
    """One mutated input and the command that reads it."""

    name: str
    files: dict[str, bytes]  # input file name -> bytes, written into the inputs folder
    argv: list[str]  # {in} stands for the inputs folder, {fix} for tests/fixtures
    invalid: bool | None  # None: the independent decider cannot say
    named: str  # the file an exit 2 must name
    outputs: tuple[str, ...] = ()  # what the command may write in its working folder
    codes: frozenset[int] = frozenset({0, 1, 2, 3, 5})
    valid_code: int | None = None  # an exit code known for the valid input


@dataclass
class Findings:
    items: list[str] = field(default_factory=list)

    def add(self, case: Case, what: str) -> None:
        self.items.append(f"{case.name}: {what}")


class _Hang(Exception):
    pass


@contextmanager
def bound(seconds: int) -> Iterator[None]:
    def alarm(*_: Any) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "dir"
        for p in sorted(folder.rglob("*"))
    }


def run_case(case: Case, base: Path, index: int, findings: Findings) -> int | None:
    inputs = base / f"in{index}"
    work = base / f"work{index}"
    inputs.mkdir()
    work.mkdir()
    for name, data in case.files.items():
        (inputs / name).write_bytes(data)
    before, fixtures_before = _tree(inputs), _FIXTURES_TREE
    argv = [a.replace("{in}", str(inputs)).replace("{fix}", str(FIX)) for a in case.argv]
    runner = CliRunner(env=NO_ENGINE)
    cwd = Path.cwd()
    os.chdir(work)
    try:
        with bound(BOUND_S):
            result = runner.invoke(app, argv, catch_exceptions=True)
    except _Hang:
        findings.add(case, f"ran past {BOUND_S} s")
        return None
    finally:
        os.chdir(cwd)
    output = result.output
    code = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        findings.add(case, f"exception {type(result.exception).__name__}: {result.exception}"[:300])
    if "Traceback" in output:
        findings.add(case, "a traceback in the output")
    if code not in case.codes:
        findings.add(case, f"exit {code} not in {sorted(case.codes)}: {output[-300:]!r}")
    if case.invalid is True and code != 2:
        findings.add(case, f"invalid input, exit {code} (not 2): {output[-300:]!r}")
    if case.invalid is False and code == 2:
        findings.add(case, f"valid input, exit 2: {output[-300:]!r}")
    if case.invalid is False and case.valid_code is not None and code != case.valid_code:
        findings.add(case, f"valid input, exit {code} (not {case.valid_code}): {output[-300:]!r}")
    if code == 2 and case.named not in output:
        findings.add(case, f"exit 2 without naming {case.named}: {output[-300:]!r}")
    if _tree(inputs) != before:
        findings.add(case, "an input file changed, or a file appeared beside it")
    if fixtures_before != _fixtures_tree():
        findings.add(case, "a fixture changed")
    stray = [p for p in _tree(work) if p.split("/")[0] not in (".sandbox-replay", *case.outputs)]
    if stray:
        findings.add(case, f"wrote outside the state folder and its output: {stray[:5]}")
    return code


def _fixtures_tree() -> dict[str, str]:
    return {k: v for k, v in _tree(FIX).items() if "__pycache__" not in k}


_FIXTURES_TREE = _fixtures_tree()


# --- the corpus --------------------------------------------------------------------------------


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def trace_cases(rng: random.Random, count: int) -> Iterator[Case]:
    golden = _lines(FIX / "golden" / "failing.jsonl")
    succeeded = _lines(FIX / "traces" / "complete_succeeded.jsonl")
    for n in range(count):
        source = golden if n % 3 else succeeded
        lines = list(source)
        kind: str
        if rng.random() < 0.45:
            kind = rng.choice(list(BYTE_MUTATIONS))
            data = BYTE_MUTATIONS[kind](rng, b"".join(lines))
        else:
            at = rng.randrange(len(lines))
            record = json.loads(lines[at])
            if rng.random() < 0.2:
                kind = "textual"
                lines[at] = textual(rng, lines[at])
            else:
                mutations = json_mutations(rng)
                kind = rng.choice(list(mutations))
                mutations[kind](record)
                lines[at] = dump(record)
            data = b"".join(lines)
        try:
            records = trace_lines(data)
            invalid = False
        except _Bad:
            records, invalid = [], True
        name = f"t{n}.jsonl"
        base = f"trace{n}-{kind}"
        yield Case(f"{base}-lint", {name: data}, ["lint", f"{{in}}/{name}"], invalid, name)
        live = bool(records) and records[0].get("purpose") == "live"
        not_ceiling = bool(records) and records[-1].get("status") != "ceiling_reached"
        extract_invalid: bool | None = True if invalid else None  # lint's field rules decide
        if not invalid and not (live and not_ceiling):
            extract_invalid = True  # no recorded production run to take
        yield Case(
            f"{base}-extract",
            {name: data},
            ["tasks", "extract", f"{{in}}/{name}", "-o", "tasks.jsonl"],
            extract_invalid,
            name,
            outputs=("tasks.jsonl",),
        )
        if source is golden:
            yield Case(
                f"{base}-packet",
                {name: data},
                ["packet", f"{{in}}/{name}", "-o", "p.tar.gz", "--workflow",
                 "{fix}/golden/golden.yaml"],
                True if invalid else None,
                name,
                outputs=("p.tar.gz",),
                codes=WITH_ENGINE,
            )  # fmt: skip


def task_cases(rng: random.Random, count: int) -> Iterator[Case]:
    original = _lines(FIX / "submit" / "tasks.jsonl")
    for n in range(count):
        lines = list(original)
        at = rng.randrange(len(lines))
        roll = rng.random()
        if roll < 0.45:
            kind = rng.choice(list(BYTE_MUTATIONS))
            data = BYTE_MUTATIONS[kind](rng, b"".join(lines))
        elif roll < 0.6:
            kind = "textual"
            lines[at] = textual(rng, lines[at])
            data = b"".join(lines)
        else:
            record = json.loads(lines[at])
            kind = rng.choice(["deep-in-input", "deep-50", "huge", "id", "unknown", "type"])
            if kind == "deep-in-input":
                record["input"]["topic"] = nest(rng.choice([150, 1500]))
            elif kind == "deep-50":
                record["input"]["topic"] = nest(50)
            elif kind == "huge":
                record["input"]["topic"] = "y" * 1_000_000
            elif kind == "id":
                record["task_id"] = rng.choice(["../x", "a/b", ".", "t1", "T2", "aux.txt", " x"])
            elif kind == "unknown":
                record["zz"] = True
            else:
                record[rng.choice(["input", "task_id", "expected"])] = rng.choice([[], 3, "s"])
            lines[at] = dump(record)
            data = b"".join(lines)
        name = f"tasks{n}.jsonl"
        yield Case(
            f"tasks{n}-{kind}",
            {name: data},
            ["submit", "--dry-run", "--variant", "{fix}/submit/a.yaml", "--tasks",
             f"{{in}}/{name}"],
            not tasks_ok(data),
            name,
            valid_code=0,
        )  # fmt: skip


def yaml_cases(rng: random.Random, count: int) -> Iterator[Case]:
    workflow = (FIX / "helpdesk" / "safe.yaml").read_bytes()
    policy = (ROOT / "policies" / "shadow.yaml").read_bytes()
    structured_wf = {
        "unknown-key": (b"steps:", b"stpes_typo: 1\nsteps:", True),
        "inf": (b"temperature: 0", b"temperature: .inf", True),
        "deep-settings": (b"temperature: 0", b"temperature: " + b"[" * 150 + b"]" * 150, True),
        "deep-ok": (b"temperature: 0", b"temperature: " + b"[" * 40 + b"]" * 40, None),
        "wrong-type": (b"max_turns: 6", b"max_turns: [6]", True),
        "comment": (b"name: helpdesk", b"name: helpdesk  # \xc3\xa9t\xc3\xa9", False),
    }
    structured_policy = {
        "inf-limit": (b"timeout_s: 300", b"timeout_s: .inf", True),
        "nan-ceiling": (b"usd: 10.0", b"usd: .nan", True),
        "big-exponent": (b"usd: 5.0", b"usd: 1.0e+400", True),
        "unknown-key": (b"limits:", b"limitz: {}\nlimits:", True),
        "string-limit": (b"pids_limit: 128", b"pids_limit: lots", True),
        "comment": (b"name: shadow", b"name: shadow # x", False),
    }
    for n in range(count):
        is_policy = n % 2 == 1
        original = policy if is_policy else workflow
        table = structured_policy if is_policy else structured_wf
        if rng.random() < 0.6:
            kind = rng.choice(list(BYTE_MUTATIONS))
            data = BYTE_MUTATIONS[kind](rng, original)
            try:
                same = yaml_data(data) == yaml_data(original)
                invalid: bool | None = False if same else None  # else: the models decide
            except _Bad:
                invalid = True
        else:
            kind = rng.choice(list(table))
            old, new, invalid = table[kind]
            assert old in original, (kind, old)
            data = original.replace(old, new, 1)
        name = f"{'p' if is_policy else 'w'}{n}.yaml"
        argv = (
            ["check", "--policy", f"{{in}}/{name}", "{in}/safe.yaml"]
            if is_policy
            else ["check", f"{{in}}/{name}"]
        )
        files = {name: data}
        for module in ("hd_tools.py", "hd_model.py"):  # its tools and its scripted model
            files[module] = (FIX / "helpdesk" / module).read_bytes()
        if is_policy:
            files["safe.yaml"] = workflow
        yield Case(f"{name}-{kind}", files, argv, invalid, name, valid_code=0)


def import_cases(rng: random.Random, count: int) -> Iterator[Case]:
    chat = _lines(FIX / "import" / "chat.jsonl")
    for n in range(count):
        lines = list(chat)
        at = rng.randrange(len(lines))
        roll = rng.random()
        if roll < 0.5:
            kind = rng.choice(list(BYTE_MUTATIONS))
            data = BYTE_MUTATIONS[kind](rng, b"".join(lines))
        elif roll < 0.75:
            kind = "textual"
            lines[at] = textual(rng, lines[at])
            data = b"".join(lines)
        else:
            kind = "deep"
            record = json.loads(lines[at])
            record["messages"][0]["content"] = nest(rng.choice([150, 3000]))
            lines[at] = dump(record)
            data = b"".join(lines)
        invalid: bool | None = None
        for raw in data.split(b"\n"):
            if raw.strip():
                try:
                    json_ok(raw)
                except _Bad:
                    invalid = True  # no line of it may be broken (JSONL), nor the whole
        name = f"chat{n}.jsonl"
        yield Case(
            f"import{n}-{kind}",
            {name: data},
            ["import", "openai-messages", f"{{in}}/{name}", "--out", "out"],
            invalid,
            name,
            outputs=("out",),
        )


def _golden_packet() -> dict[str, bytes]:
    """The members of the golden run's packet, laid out as `packet` writes them."""
    trace = (FIX / "golden" / "failing.jsonl").read_bytes()
    content = json.loads(trace.splitlines()[0])["workflow"]["content"]
    members = {"trace.jsonl": trace, "workflow/golden.yaml": content.encode("utf-8")}
    for module in ("golden_tools.py", "golden_model.py"):
        members[f"workflow/{module}"] = (FIX / "golden" / module).read_bytes()
    members["README.md"] = b"# Reviewer packet (fuzz corpus)\n"
    return members


def _pack(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _tar_readable(data: bytes) -> bool:
    """True when tarfile reads every member though the gzip stream is damaged after them.

    tarfile stops at the archive's end marker and never sees the gzip trailer (CRC, size): a
    flip there leaves the members intact, and whether that packet is invalid is a judgement
    the fuzzer does not make (found by this fuzzer: `reproduce` accepts such a packet).
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive.getmembers():
                handle = archive.extractfile(member)
                if handle is not None:
                    handle.read()
    except (tarfile.TarError, OSError, EOFError, zlib.error):
        return False
    return True


def packet_cases(rng: random.Random, count: int) -> Iterator[Case]:
    members = _golden_packet()
    whole = _pack(members)
    trace = members["trace.jsonl"]
    for n in range(count):
        roll = rng.random()
        if roll < 0.35:
            kind = rng.choice(["flip", "truncate"])
            data = BYTE_MUTATIONS[kind](rng, whole)
            invalid: bool | None = True
            if kind == "flip":
                try:  # a flip the gzip CRC does not see (header bytes) changes nothing
                    invalid = False if gzip.decompress(data) == gzip.decompress(whole) else None
                except (OSError, EOFError, ValueError, zlib.error):
                    invalid = None if _tar_readable(data) else True
        elif roll < 0.5:
            kind = "member-leaves"
            data = _pack({**members, rng.choice(["../up.txt", "/abs.txt", "a/../../x"]): b"x"})
            invalid = True
        else:
            lines = trace.splitlines(keepends=True)
            at = rng.randrange(len(lines))
            mutations = json_mutations(rng)
            kind = rng.choice([k for k in mutations if k != "huge-string"])
            record = json.loads(lines[at])
            mutations[kind](record)
            lines[at] = dump(record)
            mutated = b"".join(lines)
            try:
                trace_lines(mutated)
                invalid = False
            except _Bad:
                invalid = True
            if kind == "unknown-v":
                invalid = None  # SPEC: reproduce answers an unknown version with refused (5)
            data = _pack({**members, "trace.jsonl": mutated})
        name = f"pk{n}.tar.gz"
        yield Case(
            f"packet{n}-{kind}",
            {name: data},
            ["reproduce", f"{{in}}/{name}"],
            invalid,
            name,
            codes=WITH_ENGINE,
        )


def controls() -> Iterator[Case]:
    """The unmutated inputs: each must pass (the oracle's own control)."""
    golden = (FIX / "golden" / "failing.jsonl").read_bytes()
    yield Case("control-lint", {"g.jsonl": golden}, ["lint", "{in}/g.jsonl"], False, "g.jsonl")
    yield Case(
        "control-extract",
        {"g.jsonl": golden},
        ["tasks", "extract", "{in}/g.jsonl", "-o", "tasks.jsonl"],
        False,
        "g.jsonl",
        outputs=("tasks.jsonl",),
        valid_code=0,
    )
    yield Case(
        "control-packet",
        {"g.jsonl": golden},
        ["packet", "{in}/g.jsonl", "-o", "p.tar.gz", "--workflow", "{fix}/golden/golden.yaml"],
        False,
        "g.jsonl",
        outputs=("p.tar.gz",),
        codes=WITH_ENGINE,
        valid_code=6,
    )
    tasks = (FIX / "submit" / "tasks.jsonl").read_bytes()
    yield Case(
        "control-submit",
        {"t.jsonl": tasks},
        ["submit", "--dry-run", "--variant", "{fix}/submit/a.yaml", "--tasks", "{in}/t.jsonl"],
        False,
        "t.jsonl",
        valid_code=0,
    )
    yield Case(
        "control-import",
        {"c.jsonl": (FIX / "import" / "chat.jsonl").read_bytes()},
        ["import", "openai-messages", "{in}/c.jsonl", "--out", "out"],
        False,
        "c.jsonl",
        outputs=("out",),
        valid_code=0,
    )
    yield Case(
        "control-packet-reproduce",
        {"p.tar.gz": _pack(_golden_packet())},
        ["reproduce", "{in}/p.tar.gz"],
        False,
        "p.tar.gz",
        codes=frozenset({6}),  # every input check passed; it stopped at the missing engine
    )


def corpus() -> list[Case]:
    rng = random.Random(SEED)
    cases = [
        *controls(),
        *trace_cases(rng, 70),
        *task_cases(rng, 60),
        *yaml_cases(rng, 60),
        *import_cases(rng, 40),
        *packet_cases(rng, 30),
    ]
    return cases


def test_fuzz_corpus_is_big_and_reproducible() -> None:
    first, second = corpus(), corpus()
    assert len(first) >= 300
    assert [(c.name, c.files) for c in first] == [(c.name, c.files) for c in second]
    decided = [c for c in first if c.invalid is not None]
    assert (
        sum(c.invalid is True for c in decided) > 100
        and sum(c.invalid is False for c in decided) > 30
    )


@pytest.mark.slow
def test_fuzz_corpus_finds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ beside the inputs
    findings = Findings()
    codes: dict[int | None, int] = {}
    for index, case in enumerate(corpus()):
        code = run_case(case, tmp_path, index, findings)
        codes[code] = codes.get(code, 0) + 1
    assert not findings.items, "\n".join(findings.items[:40]) + f"\n({len(findings.items)} in all)"
    assert codes.get(2, 0) > 100 and codes.get(0, 0) > 20, codes
