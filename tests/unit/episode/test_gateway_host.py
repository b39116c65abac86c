"""The host's side of program steps: workflow shape, load-time check, gateway_request checks."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from runner.admission.eligibility import check_eligibility
from runner.domain.workflow import Workflow
from runner.episode import gatewayhost
from runner.providers.base import ProviderResponse
from tests.support.paths import TESTS

FIX = TESTS / "fixtures" / "program"
WORKFLOW = {
    "name": "w",
    "version": "1",
    "model": {"provider": "scripted", "function": "m:f"},
    "steps": [
        {
            "id": "agent",
            "program": "agent:run",
            "tools": ["kb.search"],
            "model": {"provider": "openai", "name": "gpt-4.1-mini"},
        },
        {"id": "plain", "program": "agent:run", "tools": [], "model": None},
    ],
}


def message(**fields: Any) -> dict[str, Any]:
    base = {
        "type": "gateway_request",
        "id": "g0",
        "index": 0,
        "step_id": "agent",
        "api": "chat_completions",
        "path": "/v1/chat/completions",
        "request": {"model": "gpt-4o", "messages": []},
        "headers": {},
    }
    base.update(fields)
    return base


def test_a_program_step_is_a_third_step_kind() -> None:
    spec = Workflow.model_validate(
        {"name": "w", "version": 1, "steps": [{"id": "a", "program": "m:run", "tools": ["x.y"]}]}
    )
    assert spec.tool_ids() == ["x.y"]
    assert spec.normalised()["steps"][0] == {
        "id": "a",
        "program": "m:run",
        "tools": ["x.y"],
        "model": None,
    }
    for bad in (
        {"id": "a", "program": "no-colon"},
        {"id": "a", "program": "m:run", "agent": {"max_turns": 1}},
        {"id": "a", "tool": "x.y", "tools": ["x.y"]},
        {"id": "a", "program": "m:run", "tools": ["x.y", "x.y"]},
    ):
        with pytest.raises(ValueError):
            Workflow.model_validate({"name": "w", "version": 1, "steps": [bad]})
    with pytest.raises(ValueError, match="anthropic provider answers program steps"):
        Workflow.model_validate(
            {
                "name": "w",
                "version": 1,
                "model": {"provider": "anthropic"},
                "steps": [{"id": "a", "agent": {"max_turns": 1}}],
            }
        )


def test_the_load_time_check_resolves_a_programs_declared_tools(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIX, root)
    report = check_eligibility([root / "program_unsafe.yaml"], "shadow")
    assert report.exit_code == 3
    (problem,) = report.problems
    assert problem.tool == "ticket.close" and problem.effect == "unsafe"
    assert problem.field == "steps.0.tools.1" and problem.line == 7
    assert check_eligibility([root / "program.yaml"], "shadow").exit_code == 0


def test_a_program_module_that_is_not_found_is_invalid_input(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIX, root)
    path = root / "missing.yaml"
    path.write_text((root / "program.yaml").read_text().replace("stdlib_agent:", "nowhere_x:"))
    report = check_eligibility([path], "shadow")
    assert report.exit_code == 2
    assert "program module 'nowhere_x'" in report.problems[0].message
    assert report.problems[0].field == "steps[0].program"


def test_the_program_module_is_never_imported_on_the_host(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIX, root)
    (root / "stdlib_agent.py").write_text("raise SystemExit('imported on the host')\n")
    # an import would raise SystemExit out of the check: it only locates the module
    assert check_eligibility([root / "program.yaml"], "shadow").exit_code == 0


def test_a_good_request_becomes_a_call_with_the_steps_model_applied() -> None:
    call = gatewayhost.parse_request(message(), WORKFLOW, reproduce=False)
    assert call.request["model"] == "gpt-4o" and call.body["model"] == "gpt-4.1-mini"
    with pytest.raises(gatewayhost.GatewayRequestRefused, match="undeclared_provider"):
        gatewayhost.parse_request(  # the step's model is openai: no Anthropic key (N12)
            message(api="messages", path="/v1/messages"), WORKFLOW, reproduce=False
        )
    both = copy.deepcopy(WORKFLOW)
    both["steps"][0]["model"]["apis"] = ["chat_completions", "messages"]
    messages = gatewayhost.parse_request(
        message(api="messages", path="/v1/messages"), both, reproduce=False
    )
    assert messages.body["model"] == "gpt-4o"  # another family: the request's own model
    replayed = gatewayhost.parse_request(message(), WORKFLOW, reproduce=True)
    assert replayed.body == replayed.request  # matched as recorded
    plain = gatewayhost.parse_request(message(step_id="plain"), WORKFLOW, reproduce=False)
    assert plain.body["model"] == "gpt-4o"  # the workflow's scripted model names no model


@pytest.mark.parametrize(
    "fields",
    [
        {"api": "embeddings"},
        {"path": "v1/chat"},
        {"path": "/" + "x" * 3000},
        {"request": []},
        {"step_id": "nope"},
        {"step_id": 3},
        {"headers": {"authorization": "Bearer sk-x"}},
        {"headers": {"anthropic-version": 1}},
    ],
)
def test_a_bad_request_is_refused_naming_the_field(fields: dict[str, Any]) -> None:
    with pytest.raises(gatewayhost.GatewayRequestError):
        gatewayhost.parse_request(message(**fields), WORKFLOW, reproduce=False)


def test_replies_carry_undecodable_bodies_as_base64() -> None:
    raw = b"\xff\xfe data"
    reply = gatewayhost.reply("g1", ProviderResponse(body=raw.decode("utf-8", "surrogateescape")))
    assert reply["body_encoding"] == "base64"
    import base64

    assert base64.b64decode(reply["body"]) == raw
    assert gatewayhost.message_id({"id": "x" * 65}) is None


def test_the_witnessed_record_keeps_request_and_forwarded_apart() -> None:
    call = gatewayhost.parse_request(message(), WORKFLOW, reproduce=False)
    served = ProviderResponse(body="{}", status=200, forwarded={**call.body, "max_tokens": 9})
    record = gatewayhost.witnessed_record(
        {"tool": "model", "request": {"forged": True}}, served, call
    )
    assert record["request"] == call.request  # the host's witness, not the sandbox's claim
    assert record["forwarded"]["model"] == "gpt-4.1-mini"
    assert record["forwarded"]["max_tokens"] == 9
    assert record["api"] == "chat_completions" and record["http_status"] == 200
