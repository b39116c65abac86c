"""The gateway's requests next to model calls (issue 27): embeddings, moderations, token
counting and response retrieval, recorded and served like model calls.

The official ``openai`` and ``anthropic`` SDK clients are pointed at the sandbox's gateway
(`runner.runtime.steps.gateway.Gateway`, run in this process); its requests go through the
host's episode state (`runner.episode.state.EpisodeState`: the checks, the routing, the
retrieval from the run's own answers) to fake providers on 127.0.0.1 that the tests start
(tests/support/fake_openai.py, fake_anthropic.py). Nothing leaves the machine. Then the
recorded calls are served again by a reproduce state with nothing behind it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.episode.channel import Channel
from runner.episode.state import EpisodeState
from runner.ledger import Amount, Ceiling, CeilingGuard, Ledger
from runner.providers.apis import ApiCall
from runner.providers.base import ProviderResponse
from runner.providers.gateway import GatewayRouter
from runner.providers.metered import MeteredProvider, StopSignal
from runner.providers.replay import ReplayProvider
from runner.runtime.replay.calls import Caller
from runner.runtime.replay.clock import Clock
from runner.runtime.replay.recordings import ObservationStore, TraceStore
from runner.runtime.steps.gateway import PLACEHOLDER_KEY, Gateway
from runner.settings import Settings
from tests.support import fake_anthropic, fake_openai

openai = pytest.importorskip("openai")  # the host .venv's ``sdks`` extra
anthropic = pytest.importorskip("anthropic")

PRICES = {
    "gpt-4.1-mini*": {"input_usd_per_mtok": 0.4, "output_usd_per_mtok": 1.6},
    "text-embedding-3-small*": {"input_usd_per_mtok": 0.02, "output_usd_per_mtok": 0.0},
}
WORKFLOW = {
    "name": "w",
    "version": "1",
    "model": None,
    "steps": [
        {
            "id": "agent",
            "program": "agent:run",
            "tools": [],
            "model": {
                "provider": "openai",
                "apis": [
                    "responses",
                    "embeddings",
                    "moderations",
                    "responses_retrieve",
                    "count_tokens",
                ],
            },
        }
    ],
}


class Host:
    """The host side of the channel: each ``gateway_request`` handled by an episode state."""

    def __init__(self, mode: str, provider: Any) -> None:
        self.state = EpisodeState(
            request=SimpleNamespace(mode=mode, policy=SimpleNamespace(prices=PRICES)),  # type: ignore[arg-type]
            prepared=SimpleNamespace(run_id="r", run_spec={"workflow": WORKFLOW}, manifest=None),  # type: ignore[arg-type]
            channel=Channel(),
        )
        self.provider = provider
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def send(self, type_: str, **fields: Any) -> None:
        if type_ == "call":
            with self.lock:
                self.records.append(fields["record"])

    def request_api(self, fields: dict[str, Any]) -> dict[str, Any]:
        message = {"type": "gateway_request", "id": f"g{fields['index']}", **fields}
        with self.lock:
            (reply,) = self.state._on_gateway_request(message, self.provider)
        return dict(reply)


@pytest.fixture
def fakes() -> Iterator[tuple[fake_openai.FakeOpenAI, fake_anthropic.FakeAnthropic]]:
    with (
        fake_openai.serve(fake_openai.FakeOpenAI()) as oai,
        fake_anthropic.serve(fake_anthropic.FakeAnthropic()) as ant,
    ):
        yield oai, ant


def _gateway(host: Host) -> Gateway:
    caller = Caller(
        host.send,
        lambda fields: {},
        "shadow",
        ObservationStore(None),
        TraceStore(None),
        Clock(1767225600.0, 1.0),
        request_api=host.request_api,
    )
    gateway = Gateway(caller, lambda kind, **f: None)
    gateway.start()
    gateway.activate("agent")
    return gateway


def _agent(gateway: Gateway) -> dict[str, Any]:
    """What an agent does with the SDKs: the four requests, and what it read back."""
    env = gateway.environment()
    oai = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=PLACEHOLDER_KEY, max_retries=0)
    ant = anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"], api_key=PLACEHOLDER_KEY, max_retries=0
    )
    try:
        vectors = oai.embeddings.create(
            model="text-embedding-3-small", input=["refund policy", "password reset"]
        )
        moderation = oai.moderations.create(model="omni-moderation-latest", input="hello")
        created = oai.responses.create(model="gpt-4.1-mini", input="hi")
        again = oai.responses.retrieve(created.id)
        with pytest.raises(openai.NotFoundError):
            oai.responses.retrieve("resp_never_made")
        counted = ant.messages.count_tokens(
            model="claude-sonnet-4-20250514", messages=[{"role": "user", "content": "hi"}]
        )
    finally:
        oai.close()
        ant.close()
    return {
        "vectors": [d.embedding for d in vectors.data],
        "flagged": [r.flagged for r in moderation.results],
        "created": (created.id, created.output_text),
        "again": (again.id, again.output_text),
        "tokens": counted.input_tokens,
    }


def test_the_sdks_requests_next_to_model_calls_are_answered_recorded_and_replayed(
    fakes: tuple[fake_openai.FakeOpenAI, fake_anthropic.FakeAnthropic], tmp_path: Path
) -> None:
    oai, ant = fakes
    settings = Settings(state_dir=tmp_path, openai_base_url=oai.url, anthropic_base_url=ant.url)
    spec = WORKFLOW["steps"][0]["model"]  # type: ignore[index]
    router = GatewayRouter(None, None, {"agent": spec}, [], settings)
    host = Host("shadow", router)
    gateway = _gateway(host)
    try:
        seen = _agent(gateway)
    finally:
        gateway.close()
        router.close()
    assert seen["vectors"] == [[0.25, -0.5, 0.0], [0.25, -0.5, 1.0]]
    assert seen["flagged"] == [False] and seen["tokens"] == 7
    assert seen["again"] == seen["created"]  # the run's own answer, read back
    # the retrievals never reached the provider: it was asked four times, never for an id
    assert oai.paths == ["/v1/embeddings", "/v1/moderations", "/v1/responses"]
    assert len(ant.counted) == 1 and ant.requests == []
    records = sorted(host.records, key=lambda r: r["index"])
    assert [r["api"] for r in records] == [
        "embeddings",
        "moderations",
        "responses",
        "responses_retrieve",
        "responses_retrieve",
        "count_tokens",
    ]
    assert all(r["tool"] == "model" for r in records)
    assert records[3]["request"] == {"response_id": seen["created"][0]}
    assert records[4]["http_status"] == 404 and records[4]["error"]
    # budgets: embeddings billed 8 prompt tokens at the table's price; the free ones and the
    # retrievals charged nothing; the Responses call its 100 + 20
    state = host.state
    assert (state.tokens_in, state.tokens_out) == (8 + 100, 20)
    assert state.model_calls == 4  # embeddings, moderations, responses, count_tokens
    assert state.usd == pytest.approx((8 * 0.02 + 100 * 0.4 + 20 * 1.6) / 1e6)
    assert state.unpriced_models == []  # the moderation model has no price: it bills nothing

    # reproduce: every answer from the recording, nothing behind the gateway at all
    replayed = Host("reproduce", ReplayProvider(records))
    gateway = _gateway(replayed)
    try:
        assert _agent(gateway) == seen
    finally:
        gateway.close()
    assert len(oai.paths) == 3 and len(ant.counted) == 1  # nothing forwarded in reproduce
    assert [r["api"] for r in sorted(replayed.records, key=lambda r: r["index"])] == [
        r["api"] for r in records
    ]


def _metered(tmp_path: Path, inner: Any, usd: float | None) -> tuple[MeteredProvider, Ledger]:
    ledger = Ledger.for_state_dir(tmp_path)
    ledger.create_job("job", {}, {})
    guard = CeilingGuard(ledger, "job", {"replay": Ceiling(usd=usd)})
    provider = MeteredProvider(
        inner,
        guard,
        StopSignal(),
        PRICES,
        model=None,
        variant="v",
        task_id="t",
        run_key="job/v/t",
        max_tokens=100,
    )
    return provider, ledger


class _Answer:
    name = "answer"

    def __init__(self, response: ProviderResponse) -> None:
        self.response = response
        self.sent: list[ApiCall] = []

    def forward(self, call: ApiCall) -> ProviderResponse:
        self.sent.append(call)
        return self.response


def _call(api: str, body: dict[str, Any]) -> ApiCall:
    return ApiCall(api=api, path="/v1/" + api, request=body, body=body, step_id="agent")


def test_embeddings_are_charged_like_model_calls_the_free_apis_never(tmp_path: Path) -> None:
    answer = ProviderResponse(
        body="{}", model="text-embedding-3-small", usage={"prompt_tokens": 1000}
    )
    provider, ledger = _metered(tmp_path, _Answer(answer), usd=1.0)
    provider.forward(_call("embeddings", {"model": "text-embedding-3-small", "input": "x"}))
    assert provider.charged == Amount(tokens_in=1000, tokens_out=0, usd=1000 * 0.02 / 1e6)
    free = ProviderResponse(body='{"input_tokens": 9}', model=None)
    inner = _Answer(free)
    provider.inner = inner
    provider.forward(_call("count_tokens", {"model": "claude-x-unpriced", "messages": []}))
    provider.forward(_call("moderations", {"model": "unpriced-moderation", "input": "x"}))
    assert len(inner.sent) == 2  # forwarded: an unpriced model is no refusal when nothing bills
    assert provider.charged.tokens_in == 1000  # nothing added
    # an embedding model without a price under a USD ceiling is refused, as any model is
    refused = provider.forward(_call("embeddings", {"model": "embed-unpriced", "input": "x"}))
    assert refused.error is not None and refused.error["class"] == "ModelNotPriced"
    ledger.close()


@pytest.mark.parametrize(
    ("api", "request_", "param"),
    [
        ("embeddings", {"model": "e", "input": [{"image_url": "http://x"}]}, "input[0]"),
        ("embeddings", {"model": "e", "input": "x", "extra_body": 1}, "extra_body"),
        (
            "moderations",
            {"model": "m", "input": [{"type": "image_url", "image_url": {"url": "http://x"}}]},
            "input[0].type",
        ),
        (
            "count_tokens",
            {"model": "c", "messages": [], "tools": [{"type": "web_search_20250305"}]},
            "tools[0].type",
        ),
        ("count_tokens", {"model": "c", "messages": [], "mcp_servers": []}, "mcp_servers"),
    ],
)
def test_the_allow_list_holds_for_the_new_apis(
    api: str, request_: dict[str, Any], param: str
) -> None:
    from runner.providers.allowlist import NotInert, check_request

    with pytest.raises(NotInert) as refused:
        check_request(api, request_, {})
    assert refused.value.param == param


def test_a_retrieval_request_is_checked_on_the_host_and_never_forwarded_outside_reproduce(
    tmp_path: Path,
) -> None:
    from runner.episode import gatewayhost

    message = {
        "type": "gateway_request",
        "id": "g0",
        "index": 0,
        "step_id": "agent",
        "api": "responses_retrieve",
        "path": "/v1/responses/x",
        "request": {"response_id": "../../etc"},
        "headers": {},
    }
    with pytest.raises(gatewayhost.GatewayRequestError, match="response_id"):
        gatewayhost.parse_request(message, WORKFLOW, reproduce=False)
    inner = _Answer(ProviderResponse(body="{}"))
    host = Host("record", inner)
    (reply,) = host.state._on_gateway_request(
        {**message, "request": {"response_id": "resp_1"}}, inner
    )
    assert reply["status"] == 404 and inner.sent == []
    assert host.state.model_calls == 0


def test_the_steps_model_name_replaces_chat_models_only() -> None:
    from runner.episode import gatewayhost

    named = {
        "steps": [
            {
                "id": "agent",
                "program": "agent:run",
                "model": {"provider": "openai", "name": "gpt-4.1-mini", "apis": ["embeddings"]},
            }
        ]
    }
    base = {"type": "gateway_request", "id": "g0", "index": 0, "step_id": "agent", "headers": {}}
    embeddings = gatewayhost.parse_request(
        {
            **base,
            "api": "embeddings",
            "path": "/v1/embeddings",
            "request": {"model": "text-embedding-3-small", "input": "x"},
        },
        named,
        reproduce=False,
    )
    assert embeddings.body["model"] == "text-embedding-3-small"
    named["steps"][0]["model"]["apis"] = ["responses"]  # type: ignore[index]
    responses = gatewayhost.parse_request(
        {**base, "api": "responses", "path": "/v1/responses", "request": {"model": "x"}},
        named,
        reproduce=False,
    )
    assert responses.body["model"] == "gpt-4.1-mini"
