"""Program steps in real containers: the model gateway on the sandbox's loopback.

A stdlib-only program (tests/fixtures/program/stdlib_agent.py, urllib) talks to the gateway
with Chat Completions, Responses and Messages, streaming and not; the host forwards to fake
servers on 127.0.0.1 that the tests start (tests/support/fake_openai.py,
tests/support/fake_anthropic.py). Nothing leaves the machine: the sandbox has no network, the
fakes listen on loopback.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.cli.backend_choice import one_episode_backend
from runner.episode.request import EpisodeResult
from runner.errors import IneligibleError
from runner.runs.run import execute_run
from runner.settings import Settings
from tests.support import fake_anthropic, fake_openai

pytestmark = pytest.mark.docker

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "program"
OPENAI_KEY = "sk-proj-test-REALKEY-66"
ANTHROPIC_KEY = "sk-ant-test-REALKEY-77"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIX, root)
    root.chmod(0o755)
    for path in root.iterdir():
        path.chmod(0o644)
    return root


@pytest.fixture
def fakes() -> Iterator[tuple[fake_openai.FakeOpenAI, fake_anthropic.FakeAnthropic]]:
    with (
        fake_openai.serve(fake_openai.FakeOpenAI()) as oai,
        fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as ant,
    ):
        yield oai, ant


def settings_for(tmp_path: Path, image: str, oai: Any, ant: Any, **extra: Any) -> Settings:
    return Settings(
        state_dir=tmp_path / "state",
        image=image,
        openai_base_url=oai.url,
        openai_api_key=OPENAI_KEY,
        anthropic_base_url=ant.url,
        anthropic_api_key=ANTHROPIC_KEY,
        **extra,
    )


def lines_of(result: EpisodeResult) -> list[dict[str, Any]]:
    return [json.loads(x) for x in result.trace_path.read_text().splitlines()]


def run_program(
    tmp_path: Path, image: str, project: Path, fakes: Any, workflow: str, **extra: Any
) -> tuple[EpisodeResult, list[dict[str, Any]]]:
    oai, ant = fakes
    settings = settings_for(tmp_path, image, oai, ant, **extra)
    result = execute_run(
        settings,
        project / workflow,
        project / "tasks.jsonl",
        "q1",
        backend_factory=one_episode_backend(settings, None, command="run"),
    )
    return result, lines_of(result)


def test_a_stdlib_program_speaks_the_three_apis_through_the_gateway_streams_included(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any
) -> None:
    oai, ant = fakes
    result, lines = run_program(tmp_path, sandbox_image, project, fakes, "program.yaml")
    end = lines[-1]
    assert result.status == "succeeded", end
    answers = end["output"]["answers"]
    assert answers == {
        "chat": "done",
        "chat_stream": "done",
        "responses": "done",
        "responses_stream": "done",
        "messages": "done from claude",
        "messages_stream": "done from claude",
    }
    assert end["output"]["hits"] == {"hits": ["kb-1"]}  # read tool: served from observations
    assert end["output"]["shout"] == "RESET PASSWORD"  # pure tool: ran in the sandbox
    calls = lines[1:-1]
    assert [c["tool"] for c in calls] == ["kb.search", "text.upper", *["model"] * 6]
    model_calls = calls[2:]
    assert [c["api"] for c in model_calls] == [
        "chat_completions",
        "chat_completions",
        "responses",
        "responses",
        "messages",
        "messages",
    ]
    # raw bodies byte for byte (the streams' raw events), model ids read from the responses
    served = [*oai.bodies, *ant.bodies]
    assert len(oai.requests) == 4 and len(ant.requests) == 2
    assert sorted(c["body"] for c in model_calls) == sorted(b.decode() for b in served)
    assert model_calls[1]["body"].rstrip().endswith("data: [DONE]")
    assert "event: response.completed" in model_calls[3]["body"]
    assert "event: message_stop" in model_calls[5]["body"]
    assert [c["model"] for c in model_calls] == [fake_openai.MODEL_ID] * 4 + [
        fake_anthropic.MODEL_ID
    ] * 2
    # the step's model name overrides the OpenAI requests' model (both recorded); Messages
    # requests are another family and keep theirs
    for call in model_calls[:4]:
        assert call["request"]["model"] == "gpt-4o"
        assert call["forwarded"]["model"] == "gpt-4.1-mini"
    assert [r["model"] for r in oai.requests] == ["gpt-4.1-mini"] * 4
    assert all(
        "forwarded" not in c or c["forwarded"]["model"] == c["request"]["model"]
        for c in model_calls[4:]
    )
    assert all(c["http_status"] == 200 for c in model_calls)
    # keys stay on the host: the fakes got the real keys, the program only placeholders
    assert all(h.get("Authorization") == f"Bearer {OPENAI_KEY}" for h in oai.headers)
    assert all(h.get("x-api-key") == ANTHROPIC_KEY for h in ant.headers)
    # the gateway is not egress; the meter counts the six calls
    assert end["outbound"] == []
    assert end["meter"]["model_calls"] == 6
    # the Chat Completions stream states no usage (no stream_options.include_usage): the
    # episode meter counts what the bodies state, the ledger settles that call at its reservation
    assert end["meter"]["tokens_in"] == 3 * 100 + 2 * 120


def test_embeddings_moderations_retrieval_and_token_counting_are_served_and_reproduced(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any, monkeypatch: Any
) -> None:
    from runner.reproduce.reproducer import Reproducer

    monkeypatch.chdir(project)
    oai, ant = fakes
    result, lines = run_program(tmp_path, sandbox_image, project, fakes, "program_side.yaml")
    end = lines[-1]
    assert result.status == "succeeded", end
    assert end["output"] == {
        "embedding": [0.25, -0.5, 0.0],
        "flagged": False,
        "retrieved_same": True,
        "unknown_status": 404,
        "input_tokens": 7,
    }
    calls = lines[1:-1]
    assert [c["api"] for c in calls] == [
        "embeddings",
        "moderations",
        "responses",
        "responses_retrieve",
        "responses_retrieve",
        "count_tokens",
    ]
    # the embedding model is the request's own (the step's name replaces chat models only);
    # retrievals never reached the provider
    assert oai.requests[0]["model"] == "text-embedding-3-small"
    assert oai.paths == ["/v1/embeddings", "/v1/moderations", "/v1/responses"]
    assert ant.counted[0]["model"] == "claude-sonnet-4-20250514"  # the other family: its own
    # budgets: the embeddings' 4 prompt tokens and the Responses call's 100 + 20
    assert end["meter"]["model_calls"] == 4
    assert end["meter"]["tokens_in"] == 4 + 100
    sent = len(oai.requests) + len(ant.counted)
    same = Reproducer(settings_for(tmp_path, sandbox_image, oai, ant)).reproduce(result.trace_path)
    assert same.outcome == "reproduced", same.to_json()
    assert len(oai.requests) + len(ant.counted) == sent  # served from the trace


def test_reproduce_serves_every_model_request_from_the_trace_and_a_changed_program_diverges(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any, monkeypatch: Any
) -> None:
    from runner.reproduce.reproducer import Reproducer
    from runner.wire.observed import refuses

    monkeypatch.chdir(project)  # as a user does: reproduce from the project folder
    oai, ant = fakes
    result, _ = run_program(tmp_path, sandbox_image, project, fakes, "program.yaml")
    assert result.status == "succeeded"
    sent = len(oai.requests) + len(ant.requests)
    settings = settings_for(tmp_path, sandbox_image, oai, ant)
    same = Reproducer(settings).reproduce(result.trace_path)
    assert same.outcome == "reproduced", same.to_json()
    assert same.nondeterminism is not None  # a program's clean replay: nothing of its own code
    own = [e for e in same.nondeterminism["entries"] if refuses(e)]
    assert own == [], json.dumps(own)
    assert Reproducer(settings, strict_determinism=True).reproduce(result.trace_path).exit_code == 0
    assert len(oai.requests) + len(ant.requests) == sent  # served from the trace, nothing sent
    replayed = [json.loads(x) for x in Path(str(same.replay_trace)).read_text().splitlines()]
    recorded = lines_of(result)
    assert [c.get("body") for c in replayed[1:-1]] == [c.get("body") for c in recorded[1:-1]]
    changed = Reproducer(settings, workflow=project / "program_v2.yaml").reproduce(
        result.trace_path
    )
    assert changed.outcome == "not_reproduced", changed.to_json()
    first = changed.first_difference or {}
    assert first["index"] == 4 and first["tool"] == "model", first  # the Responses request
    assert "input" in first["message"] and "(v2)" in first["message"], first
    assert first["label"] == "prompt_changed" and "input" in first["label_rule"], first
    assert len(oai.requests) + len(ant.requests) == sent


def test_an_unsafe_tool_in_a_declared_toolset_is_ineligible_before_any_container(
    tmp_path: Path, project: Path, fakes: Any
) -> None:
    class Spy:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the backend was used: {name}")

    oai, ant = fakes
    with pytest.raises(IneligibleError) as caught:
        execute_run(
            settings_for(tmp_path, "unused", oai, ant),
            project / "program_unsafe.yaml",
            project / "tasks.jsonl",
            "q1",
            backend=Spy(),
        )
    assert 'step "agent" (program toolset)' in str(caught.value)
    assert "ticket.close" in str(caught.value) and "unsafe" in str(caught.value)
    assert not (tmp_path / "state" / "runs").exists()
    assert oai.requests == [] and ant.requests == []


def test_an_undeclared_tool_and_a_socket_elsewhere_are_named_in_the_episode(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any
) -> None:
    result, lines = run_program(tmp_path, sandbox_image, project, fakes, "program_probe.yaml")
    end = lines[-1]
    calls = lines[1:-1]
    assert result.status == "denied", end
    assert calls[0]["tool"] == "text.count"
    assert calls[0]["error"]["class"] == "runner.errors.CapabilityDenied"
    assert "not in the declared toolset" in calls[0]["error"]["message"]
    assert end["failure"]["tool"] == "text.count" and end["failure"]["call_index"] == 0
    assert end["not_run"] == ["socket"]


def test_a_socket_to_anything_but_the_gateway_is_in_the_outbound_log(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any
) -> None:
    path = project / "program_socket.yaml"
    path.write_text(
        (project / "program_probe.yaml")
        .read_text()
        .replace(
            "  - id: undeclared\n    program: stdlib_agent:undeclared\n    tools: [text.upper]\n",
            "",
        )
    )
    path.chmod(0o644)
    result, lines = run_program(tmp_path, sandbox_image, project, fakes, "program_socket.yaml")
    end = lines[-1]
    assert result.status == "succeeded", end
    assert end["output"]["outcome"] in ("OSError", "TimeoutError", "socket.timeout")
    assert end["output"]["answer"] == "done"  # the gateway still answers
    destinations = {(a.get("address"), a.get("port")) for a in end["outbound"]}
    assert ("203.0.113.9", 443) in destinations
    assert all(a.get("address") not in ("127.0.0.1", "localhost") for a in end["outbound"])


def test_no_key_and_no_key_prefix_reach_the_container(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any
) -> None:
    result, lines = run_program(tmp_path, sandbox_image, project, fakes, "program_secrets.yaml")
    end = lines[-1]
    assert result.status == "succeeded", end
    assert end["output"]["found"] == []
    assert end["output"]["placeholder"] == "sandbox-replay-placeholder-not-a-key"


def test_ceilings_hold_for_gateway_traffic_across_four_concurrent_sandboxes(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any
) -> None:
    import os
    import subprocess
    import sys

    from runner.ledger import Ledger

    oai, _ant = fakes
    state = tmp_path / "state"
    ceiling = 0.0025  # one reservation (1024 capped output tokens) fits, two do not
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(state),
        SANDBOX_REPLAY_IMAGE=sandbox_image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
        SANDBOX_REPLAY_OPENAI_BASE_URL=oai.url,
        SANDBOX_REPLAY_OPENAI_API_KEY=OPENAI_KEY,
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from runner.cli import main; main()",
            "submit",
            "--json",
            "--variant",
            "program_one.yaml",
            "--variant",
            "program_one_b.yaml",
            "--tasks",
            "tasks8.jsonl",
            "--concurrency",
            "4",
            "--ceiling-usd",
            str(ceiling),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert proc.returncode == 4, report
    with Ledger.for_state_dir(state) as ledger:
        totals = ledger.totals(report["job_id"])["replay"]
        calls = [c for c in ledger.charges(report["job_id"]) if c.kind == "model_call"]
        runs = ledger.runs(report["job_id"])
    assert totals.charged.usd <= ceiling and totals.reserved.usd == 0
    settled = [c for c in calls if c.state == "settled"]
    assert settled and len(oai.requests) == len(settled)  # nothing forwarded uncharged
    assert all(r["max_tokens"] == 1024 for r in oai.requests)  # the cap the estimate used
    refused = 0
    for run in runs:
        lines = Path(str(run.trace_path)).read_text().splitlines()
        end = json.loads(lines[-1])
        assert end["status"] == run.status, (run.key, end["status"], run.status)
        if run.status == "ceiling_reached":
            refused += 1
            assert end["failure"]["error_class"] == "CeilingReached"
            model_call = json.loads(lines[1])
            assert model_call["error"]["class"] == "CeilingReached"
            answer = end["output"]["answer"]  # the program got the API's own error shape
            assert answer["status"] == 429
            assert answer["error"]["error"]["type"] == "insufficient_quota"
    assert refused >= 1
    assert report["stopped_by_ceiling"] or report["not_run"]
    assert report["ceiling_reached"]["purpose"] == "replay"
    assert len(runs) + len(report["not_run"]) == 16  # every pair is run or listed


def test_gateway_overhead_per_model_call_is_measured(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any, capsys: Any
) -> None:
    """What the gateway adds per model call, against a direct call to the same fake server."""
    import urllib.request

    oai, _ = fakes
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})
    direct: list[float] = []
    for _ in range(20):
        request = urllib.request.Request(
            oai.url + "/chat/completions",
            data=body.encode(),
            headers={"Content-Type": "application/json"},
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        direct.append(time.perf_counter() - started)
    result, lines = run_program(tmp_path, sandbox_image, project, fakes, "program.yaml")
    assert result.status == "succeeded"
    through = [c["duration_s"] for c in lines[1:-1] if c["tool"] == "model"]
    direct_ms = sorted(direct)[len(direct) // 2] * 1000
    gateway_ms = sorted(through)[len(through) // 2] * 1000
    with capsys.disabled():
        print(
            f"\ngateway per model call: median {gateway_ms:.1f} ms through the gateway "
            f"(program -> gateway -> channel -> host -> fake), {direct_ms:.1f} ms direct; "
            f"adds {gateway_ms - direct_ms:.1f} ms"
        )
    assert gateway_ms < 1000


def test_a_tool_error_the_program_caught_is_recorded_and_named_and_a_dataclass_comes_back(
    tmp_path: Path, sandbox_image: str, project: Path, fakes: Any
) -> None:
    """Issue 27, in a sandbox: the failed call keeps its error and the end line names it
    (``tool_errors``) in a run that ``succeeded``; a pure tool returning a dataclass is
    recorded as its JSON form and the program gets the dataclass (was: TypeError)."""
    result, lines = run_program(tmp_path, sandbox_image, project, fakes, "program_recovers.yaml")
    end, calls = lines[-1], lines[1:-1]
    assert result.status == "succeeded", end
    assert end["output"]["caught"] is not None
    assert end["output"]["span"] == ["Span", 4]
    assert calls[0]["tool"] == "text.fail" and calls[0]["error"]["class"].endswith("ValueError")
    assert calls[1]["tool"] == "text.span" and calls[1]["encoding"] == "json_form"
    assert json.loads(calls[1]["body"]) == {"start": 0, "end": 4}
    assert end["tool_errors"] == {
        "count": 1,
        "calls": [
            {"call_index": 0, "tool": "text.fail", "error_class": calls[0]["error"]["class"]}
        ],
    }
