"""The ``model:NAME`` judge: a model ranks a group's anonymised candidates (`ModelJudge`).

The request shows the candidates as ``1``..``N`` (never variant names) with the task's input
and expected outcome; the answer must be exactly ``{"ranks": {"1": 1, "2": 2, ...}}`` naming
every candidate once with a rank >= 1; anything else is a `GradingError`. Each call is charged
to purpose ``judge`` through the `CeilingGuard`: reserved before (``runs=1``, an upper bound of
tokens: prompt bytes plus ``max_tokens``, priced), settled after from the response's usage and
``model`` field, released when the provider fails before the request left (charged at the
reservation, marked estimated, when it may have reached the provider).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from runner.errors import GradingError, InputError, SandboxReplayError
from runner.grading.model import Group, Ranking, normalise_ranks
from runner.hostlog import get_logger
from runner.ledger import Amount, CeilingGuard, estimate_usd, prompt_tokens_bound
from runner.ledger.pricing import call_usd
from runner.trace.strictjson import loads as strict_loads

__all__ = ["ModelJudge", "Provider"]

log = get_logger(__name__)

# A response is the decoded dict, its raw JSON body text, or an object with ``body`` (raw text)
# and ``error`` attributes (runner.providers.base.ProviderResponse).
Provider = Callable[[dict[str, Any]], Any]

_SYSTEM = (
    "You grade the outcomes of several runs of an AI agent on one task. Rank the candidates "
    "from best (1) to worst; candidates of equal quality share a rank. Judge by whether each "
    "did the task: its output and the tool calls it made, compared with the expected outcome "
    "when one is given. Answer with exactly one JSON object and nothing else: "
    '{"ranks": {"<candidate>": <rank>, ...}} naming every candidate once.'
)


class ModelJudge:
    """A ``model:NAME`` judge, charged to purpose ``judge`` (see the module docstring).

    It is ``order_sensitive``: `runner.grading.grade` asks it twice per group, in two orders
    of the candidates, and reports when the rankings disagree (`runner.grading.order`).

    Args:
        model: the model to ask (``NAME``).
        provider: ``request -> response``, OpenAI Chat Completions shape.
        guard: the job's ceiling guard; every call is reserved and settled under ``judge``.
        prices: the policy's price table (model id or glob -> USD per million tokens).
        max_tokens: the answer's token cap, sent in the request and used in the estimate.
        settings: extra request fields (e.g. ``temperature``); ``model``, ``messages`` and
            ``max_tokens`` cannot be overridden.
    """

    def __init__(
        self,
        model: str,
        provider: Provider,
        guard: CeilingGuard,
        prices: Mapping[str, Any],
        *,
        max_tokens: int = 512,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        if not model:
            raise InputError("model:NAME needs a model name", field="judge")
        self.order_sensitive = True
        estimate_usd(prices, model, 0, 0)  # an unpriced model fails here, before any call
        self.name = f"model:{model}"
        self.model = model
        self._provider = provider
        self._guard = guard
        self._prices = prices
        self._max_tokens = max_tokens
        self._settings = {"temperature": 0, **(settings or {})}

    def request(self, group: Group) -> dict[str, Any]:
        """Return the Chat Completions request that asks the model to rank ``group``."""
        candidates = {
            str(i): {k: v for k, v in r.to_dict().items() if k != "variant"}
            for i, r in enumerate(group.results, start=1)
        }
        task = {
            "task_input": group.to_dict()["input"],
            "expected": group.to_dict()["expected"],
            "candidates": candidates,
        }
        user = json.dumps(task, sort_keys=True, ensure_ascii=False, default=str)
        return {
            **self._settings,
            "model": self.model,
            "max_tokens": self._max_tokens,
            "messages": [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}],
        }

    def _estimate(self, request: Mapping[str, Any]) -> Amount:
        # Upper bound of the whole request, settings included (runner.ledger.tokens).
        tokens_in = prompt_tokens_bound(request)
        usd = estimate_usd(self._prices, self.model, tokens_in, self._max_tokens)
        return Amount(runs=1, tokens_in=tokens_in, tokens_out=self._max_tokens, usd=usd)

    def __call__(self, group: Group) -> Ranking:
        """Ask the model to rank ``group``; the call is charged to ``judge``.

        Raises:
            CeilingReached: the judge ceiling has no room for this call (nothing was sent).
            GradingError: the provider failed, or its answer is not a valid ranking.
        """
        request = self.request(group)
        reservation = self._guard.reserve(
            "judge",
            self._estimate(request),
            kind="model_call",
            task_id=group.task_id,
            model=self.model,
        )
        try:
            raw = self._provider(request)
        except SandboxReplayError:
            self._guard.release(reservation)
            raise
        except Exception as exc:
            self._guard.release(reservation)
            raise GradingError(
                f"judge {self.name} on task {group.task_id!r}: provider failed: {exc!r}",
                task_id=group.task_id,
                judge=self.name,
            ) from exc
        failure = _provider_error(raw)
        if failure is not None:
            if getattr(raw, "maybe_billed", False):  # it may have reached the provider (N10)
                self._guard.settle(reservation, reservation.estimate, estimated=True)
            else:
                self._guard.release(reservation)
            raise GradingError(
                f"judge {self.name} on task {group.task_id!r}: provider failed: {failure:.300}",
                task_id=group.task_id,
                judge=self.name,
            )
        try:
            response = self._decode(group, raw)
            usage = response.get("usage")
            answered_by = response.get("model")
            if not isinstance(usage, Mapping) or not isinstance(answered_by, str):
                raise self._bad(group, "the response has no usage or model")
        except GradingError:
            # The call went out but its cost is unknown: charge the (upper-bound) estimate.
            self._guard.settle(reservation, reservation.estimate)
            raise
        tokens_in, tokens_out = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
        # a model id the table lacks is priced as the one asked (priced: checked in __init__)
        usd = call_usd(self._prices, tokens_in, tokens_out, answered_by, self.model)
        assert usd is not None
        self._guard.settle(
            reservation,
            Amount(runs=1, tokens_in=tokens_in, tokens_out=tokens_out, usd=usd),
            model=answered_by,
        )
        content = self._content(group, response)
        ranks = self._parse(group, content)
        return Ranking(
            group.task_id,
            ranks,
            judge=self.name,
            detail={
                "model": answered_by,
                "answer": content,
                "tokens_in": tokens_in,
                "tokens_out": tokens_out,
                "usd": usd,
            },
        )

    def _decode(self, group: Group, raw: Any) -> dict[str, Any]:
        if isinstance(raw, dict):
            return raw
        body = getattr(raw, "body", raw)  # a provider response object carries its raw body
        if not isinstance(body, str):
            raise self._bad(group, f"the provider returned {type(raw).__name__}, not a response")
        try:
            response = strict_loads(body)  # a provider body is hostile text too
        except ValueError as exc:
            raise self._bad(group, f"the response body is not JSON ({exc})") from exc
        if not isinstance(response, dict):
            raise self._bad(group, "the response body is not a JSON object")
        return response

    def _parse(self, group: Group, content: str) -> dict[str, int]:
        try:
            answer = strict_loads(content)
        except ValueError as exc:
            raise self._bad(group, f"the answer is not a JSON object: {content!r:.200}") from exc
        labels = {str(i): r.variant for i, r in enumerate(group.results, start=1)}
        ranks = (
            answer.get("ranks") if isinstance(answer, dict) and set(answer) == {"ranks"} else None
        )
        if not isinstance(ranks, dict) or set(ranks) != set(labels):
            raise self._bad(
                group,
                f'the answer must be {{"ranks": {{...}}}} naming candidates'
                f" {sorted(labels)} once each: {content!r:.200}",
            )
        for label, rank in ranks.items():
            if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
                raise self._bad(
                    group, f"candidate {label}: rank must be an integer >= 1, got {rank!r}"
                )
        return normalise_ranks({labels[label]: rank for label, rank in ranks.items()})

    def _content(self, group: Group, response: Mapping[str, Any]) -> str:
        try:
            content = response["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise self._bad(group, "the response has no choices[0].message.content text")
        return content

    def _bad(self, group: Group, why: str) -> GradingError:
        log.warning("judge_answer_malformed", judge=self.name, task_id=group.task_id, why=why)
        return GradingError(
            f"judge {self.name} on task {group.task_id!r}: {why}",
            task_id=group.task_id,
            judge=self.name,
        )


def _provider_error(raw: Any) -> str | None:
    """The provider's error when it answered with one (no completion, nothing billed)."""
    error = getattr(raw, "error", None)
    if error:
        return str(error)
    if isinstance(raw, str):
        try:
            raw = strict_loads(raw)
        except ValueError:
            return None
    if isinstance(raw, Mapping) and raw.get("error") and "choices" not in raw:
        return json.dumps(raw["error"], default=str)
    return None


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
