"""The one strict JSON decoder (runner/trace/strictjson.py): what it refuses; it never recurses.

Nesting is refused before the parser's recursion can blow; NaN,
infinities (also ``1e400``, which `json` turns into ``inf`` without asking) and duplicate keys
are refused; the depth check costs about as much as a parse, whatever the shape.
"""

from __future__ import annotations

import json
import random
import re
import time

import pytest

from runner.trace.strictjson import MAX_DEPTH, StrictJSONError, check_depth, depth_of, loads


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("NaN", "NaN is not JSON"),
        ('{"a": -Infinity}', "-Infinity is not JSON"),
        ("[1e400]", "1e400 is not JSON"),
        ("[-1e999]", "not JSON (numbers must be finite)"),
        ("1" * 5000, "not valid JSON"),
        ("[1,]", "not valid JSON"),
        (
            "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
            f"nested too deeply (more than {MAX_DEPTH}",
        ),
        ("[" * 100_000, f"nested too deeply (more than {MAX_DEPTH}"),
        ('{"a":' * 5000 + "1" + "}" * 5000, f"nested too deeply (more than {MAX_DEPTH}"),
    ],
)
def test_refused(text: str, why: str) -> None:
    with pytest.raises(StrictJSONError, match=re.escape(why)):
        loads(text)


def test_duplicate_keys_name_the_key_and_bytes_must_be_utf8() -> None:
    with pytest.raises(StrictJSONError) as info:
        loads('{"a": {"b": 1, "b": 2}}')
    assert info.value.field == "b"
    with pytest.raises(StrictJSONError, match=r"not UTF-8 text \(byte 6\)"):
        loads(b'{"a": \xff}')
    with pytest.raises(StrictJSONError):
        loads(b"\xef\xbb\xbf{}")  # a BOM is no JSON text


def test_limit_is_exact_and_brackets_inside_strings_do_not_count() -> None:
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert depth_of(loads(at_limit)) == MAX_DEPTH
    assert loads('{"s": "' + "[" * 500 + '\\"]]"}')["s"].startswith("[[[")
    # closing brackets inside a string must not hide real depth
    hidden = '["' + "]" * 200 + '", ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "]"
    with pytest.raises(StrictJSONError, match="nested too deeply"):
        loads(hidden)


def test_depth_check_agrees_with_the_real_depth() -> None:
    rng = random.Random(10)

    def make(depth: int) -> object:
        if depth == 0 or rng.random() < 0.25:
            return rng.choice([1, "a]", "[x{", None, 2.5])
        if rng.random() < 0.5:
            return [make(depth - 1) for _ in range(rng.randint(0, 3))]
        return {f"k{i}}}": make(depth - 1) for i in range(rng.randint(0, 3))}

    for _ in range(2000):
        value = make(rng.randint(0, 12))
        text = json.dumps(value)
        depth = depth_of(value)
        assert loads(text, max_depth=depth) == value
        if depth:
            with pytest.raises(StrictJSONError):
                loads(text, max_depth=depth - 1)


@pytest.mark.parametrize(
    "skeleton",
    [
        b"[" * 99 + b"]" * 99,  # many deep groups: many peel passes would be slow
        b"[]",  # wide and flat: many runs would be slow
        b"[" * 7 + b"]" * 7,
    ],
)
def test_depth_check_of_16_mib_costs_less_than_a_parse(skeleton: bytes) -> None:
    groups = b",".join([skeleton] * (16 * 1024 * 1024 // (len(skeleton) + 1)))
    too_deep_at_the_end = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    text = b"[" + groups + b"," + too_deep_at_the_end + b"]"
    started = time.perf_counter()
    with pytest.raises(StrictJSONError, match="nested too deeply"):
        loads(text)  # the whole text is checked, nothing is parsed
    elapsed = time.perf_counter() - started
    assert elapsed < 5, elapsed  # measured: 0.2-1.2 s on a shared 2-core machine


def test_check_depth_of_python_values_without_recursion() -> None:
    value: list[object] = []
    for _ in range(50_000):
        value = [value]
    assert depth_of(value, stop_above=70) == 71
    with pytest.raises(StrictJSONError, match="more than 64"):
        check_depth(value)
    check_depth([[{"a": [1]}]])
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(StrictJSONError):
        check_depth(cyclic)
