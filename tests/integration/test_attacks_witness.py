"""Tool code racing the egress witness, in real sandboxes, once per backend.

The witness (runner/runtime/egress/witness.py) reads a trapped call's arguments from the
worker's memory and decides; a thread of the worker can rewrite that memory meanwhile. These
attacks rewrite it as fast as they can during thousands of trapped calls, and assert what the
host witnesses: nothing reached a destination the witness denies (a listener on the sandbox's
own loopback counts what arrived), and every attempt that failed for the kernel's lack of a
route is in the outbound log (the tool's count of ``ENETUNREACH`` answers equals the log's
count). Hostile tools: tests/fixtures/attacks/hostile_tools.py. Addresses are TEST-NET-3
(RFC 5737); the sandbox has no route anyway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration._episodes import Outcome, Project
from tests.integration._hostile import backend, backend_entry, project, run_steps

pytestmark = pytest.mark.docker
__all__ = ["backend", "backend_entry", "project"]  # fixtures

TRIES = 10_000  # the review's target (it measured 5 and 12 leaks per 3,000 on main)
TARGET = ("203.0.113.77", 443)


def _logged(out: Outcome, kind: str, address: str, port: int) -> int:
    return sum(
        a["count"]
        for a in out.end["outbound"]
        if (a["kind"], a["address"], a["port"]) == (kind, address, port)
    )


def test_a_name_written_into_an_unnamed_resolver_sendmsg_reaches_nothing_unlogged(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """N07: an unnamed ``sendmsg`` on the socket the witness swapped in for the nameserver
    (its own resolver's), while another thread writes a name into the header: on main the
    witness let the call continue and the kernel re-read the header, so datagrams reached a
    denied loopback listener and attempts at 203.0.113.77:443 failed unlogged. Now the
    witness sends the bytes it read itself; a header it read with a name is denied, logged."""
    port = 7411
    steps = (
        f"- {{id: r, tool: witness.race_resolver_name, args: {{tries: {TRIES}, port: {port}, "
        f"target: {TARGET[0]}, target_port: {TARGET[1]}}}}}\n"
    )
    out = run_steps(project, backend, sandbox_image, tmp_path, steps, timeout_s=240)
    assert out.end["status"] == "succeeded", out.end
    report = out.body("r")
    loopback = report["phases"][f"127.0.0.1:{port}"]
    denied = report["phases"]["{}:{}".format(*TARGET)]
    # the race ran: both states of the header were seen (answered, and denied by name)
    for phase in (loopback, denied):
        assert phase["results"].get("sent", 0) > 0, report
        assert phase["results"].get("ENETUNREACH", 0) > 0, report
        assert sum(phase["results"].values()) == TRIES // 2, report
    assert loopback["received"] == 0, report  # no datagram past the witness
    # every ENETUNREACH is the witness's, logged with the name it read
    assert _logged(out, "sendmsg", "127.0.0.1", port) == loopback["results"]["ENETUNREACH"]
    assert _logged(out, "sendmsg", *TARGET) == denied["results"]["ENETUNREACH"], report
    assert out.end["coverage"] == "full", out.end["coverage_detail"]
