"""The egress baseline: matching with globs, writing, and strict loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.errors import InputError
from runner.policy.egress_baseline import (
    EgressBaseline,
    baseline_from,
    load_baseline,
    new_destinations,
    write_baseline,
)

ATTEMPTS = [
    {"kind": "connect", "host": "api.openai.com", "port": 443, "count": 3},
    {"kind": "getaddrinfo", "host": "API.OpenAI.com", "port": 443},
    {"kind": "connect", "address": "192.0.2.1", "port": 8443},
    {"kind": "sendto", "address": "198.51.100.7", "port": 53},
]


def _baseline(*destinations: dict[str, object]) -> EgressBaseline:
    return EgressBaseline.model_validate({"v": 1, "destinations": list(destinations)})


def test_an_empty_baseline_reports_every_destination_once_in_order() -> None:
    new = new_destinations(_baseline(), [*ATTEMPTS, ATTEMPTS[0]])
    assert [(d["kind"], d["host"], d["port"]) for d in new] == [
        ("connect", "api.openai.com", "443"),
        ("getaddrinfo", "api.openai.com", "443"),
        ("connect", "192.0.2.1", "8443"),
        ("sendto", "198.51.100.7", "53"),
    ]


def test_globs_on_host_port_and_kind_match_case_insensitively() -> None:
    baseline = _baseline(
        {"host": "*.OPENAI.com", "port": 443},  # any kind
        {"host": "192.0.2.*", "port": "84?3", "kind": "connect"},
    )
    assert new_destinations(baseline, ATTEMPTS) == [
        {"kind": "sendto", "host": "198.51.100.7", "port": "53"}
    ]
    # the kind narrows: a sendto to the allowed address is still new
    assert new_destinations(baseline, [{"kind": "sendto", "address": "192.0.2.1", "port": 8443}])


def test_hostile_entries_are_read_as_text_and_non_mappings_ignored() -> None:
    hostile = [None, "x", {"kind": ["a"], "host": {"h": 1}, "port": "1" * 100}]
    new = new_destinations(_baseline(), hostile)  # type: ignore[arg-type]
    assert len(new) == 1 and len(new[0]["port"]) == 16


def test_a_written_baseline_covers_what_it_was_written_from(tmp_path: Path) -> None:
    document = baseline_from([ATTEMPTS[:2], ATTEMPTS[2:]])
    path = tmp_path / "baseline.json"
    write_baseline(path, document)
    loaded = load_baseline(path)
    assert new_destinations(loaded, ATTEMPTS) == []
    assert new_destinations(loaded, [{"kind": "connect", "host": "evil.example", "port": 443}])
    assert {"host": "192.0.2.1", "port": 8443, "kind": "connect"} in document["destinations"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"v": 2, "destinations": []}', "v"),
        ('{"v": 1, "destinations": [{"port": 1}]}', "destinations.0.host"),
        ('{"v": 1, "destinations": [{"host": "a", "extra": 1}]}', "destinations.0.extra"),
        ('{"v": 1, "destinations": [], "v": 1}', None),  # a duplicate key: not strict JSON
        ('{"v": 1, "destinations": [NaN]}', None),
    ],
)
def test_a_bad_file_is_an_input_error_naming_the_field(
    tmp_path: Path, text: str, field: str | None
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_baseline(path)
    assert caught.value.exit_code == 2
    assert str(path) in str(caught.value)
    if field is not None:
        assert caught.value.fields.get("field") == field


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"v": 1, "destinations": []}) + " " * (5 << 20), encoding="utf-8")
    with pytest.raises(InputError, match="larger than"):
        load_baseline(huge)
