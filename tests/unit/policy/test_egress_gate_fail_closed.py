"""Attack test: the egress gate trusts what it cannot see and writes globs it was given.

1. ``--write-egress-baseline`` copies each attempt's host, port and kind into the baseline
   verbatim, but a baseline's fields are globs (`runner.policy.egress_baseline`): an attempt at
   host ``*`` (``socket.getaddrinfo("*", 443)`` in tool code, which the runtime's hook logs as
   kind ``dns`` host ``*``: ordinary code, no forging) writes an entry that matches every later
   lookup, so the gate never reports a new dependency again.
2. The gate compares only the ``outbound`` list. A run whose log hit the 1000-destination cap
   (``outbound_dropped`` above 0) or could not see a process (``coverage: partial``) is
   reported "no new destination" (exit 0): the attempts past the cap, or of a shell child, are
   never compared. Fail closed would be: such an episode is not a pass.
"""

from __future__ import annotations

import json
from pathlib import Path

from runner.cli.egress_gate import gate_egress
from runner.policy.egress_baseline import (
    EgressBaseline,
    baseline_from,
    load_baseline,
    new_destinations,
    write_baseline,
)
from runner.policy.egress_gate import egress_of_trace
from tests.support.paths import REPO

TRACE = REPO / "tests" / "fixtures" / "traces" / "complete_succeeded.jsonl"


def test_a_written_baseline_does_not_turn_a_recorded_star_into_a_wildcard(tmp_path: Path) -> None:
    recorded = [{"kind": "dns", "host": "*", "port": 443}]
    path = tmp_path / "baseline.json"
    write_baseline(path, baseline_from([recorded]))
    baseline = load_baseline(path)
    later = [{"kind": "dns", "host": "exfil.attacker.example", "port": 443}]
    assert new_destinations(baseline, later) == [
        {"kind": "dns", "host": "exfil.attacker.example", "port": "443"}
    ]


def _trace(tmp_path: Path, **end: object) -> Path:
    lines = TRACE.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    last.update(end)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n", encoding="utf-8")
    return path


def _baseline(tmp_path: Path) -> Path:
    path = tmp_path / "known.json"
    document = {"v": 1, "destinations": [{"host": "*.internal.example", "kind": "*"}]}
    path.write_text(json.dumps(document), encoding="utf-8")
    EgressBaseline.model_validate(document)
    return path


def test_control_a_new_destination_fails_the_gate(tmp_path: Path) -> None:
    trace = _trace(
        tmp_path, outbound=[{"kind": "dns", "host": "evil.example", "port": 443, "count": 1}]
    )
    episodes = [egress_of_trace(trace)]
    assert gate_egress(episodes, baseline=_baseline(tmp_path), write=None) == 1


def test_an_episode_with_dropped_attempts_is_not_a_pass(tmp_path: Path) -> None:
    known = [
        {"kind": "dns", "host": f"h{i}.internal.example", "port": 443, "count": 1}
        for i in range(1000)
    ]
    trace = _trace(tmp_path, outbound=known, outbound_dropped=1, coverage="partial")
    episodes = [egress_of_trace(trace)]
    assert gate_egress(episodes, baseline=_baseline(tmp_path), write=None) == 1
    # each reason alone fails the gate; the complete log of the same destinations passes
    dropped = _trace(tmp_path, outbound=known, outbound_dropped=1, coverage="full")
    assert gate_egress([egress_of_trace(dropped)], baseline=_baseline(tmp_path), write=None) == 1
    partial = _trace(tmp_path, outbound=known, outbound_dropped=0, coverage="partial")
    assert gate_egress([egress_of_trace(partial)], baseline=_baseline(tmp_path), write=None) == 1
    complete = _trace(tmp_path, outbound=known, outbound_dropped=0, coverage="full")
    assert gate_egress([egress_of_trace(complete)], baseline=_baseline(tmp_path), write=None) == 0
