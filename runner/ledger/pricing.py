"""Model prices and the USD cost of a number of tokens.

Prices are the policy's ``prices`` table (policies/*.yaml): model id or glob -> USD per million
input tokens and per million output tokens. A model id read from a response is often a dated
snapshot (``gpt-4.1-2025-04-14``), so lookup is the policy's rule (`PolicySpec.price_for`): an
exact key first, else the longest glob key that matches (``gpt-4.1*``). A model with no price is
an error, never a silent zero: shadow evaluation must not look free.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.errors import InputError

_INPUT = "input_usd_per_mtok"
_OUTPUT = "output_usd_per_mtok"


@dataclass(frozen=True)
class ModelPrice:
    """Price of one model.

    Attributes:
        input_usd_per_mtok: USD per million input (prompt) tokens.
        output_usd_per_mtok: USD per million output (completion) tokens.

    """

    input_usd_per_mtok: float
    output_usd_per_mtok: float


def _field(entry: Any, key: str, model: str) -> float:
    value = entry.get(key) if isinstance(entry, Mapping) else getattr(entry, key, None)
    if value is None:
        raise InputError("missing", field=f"prices.{model}.{key}")
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InputError(
            f"price must be a number >= 0, got {value!r}", field=f"prices.{model}.{key}"
        )
    return float(value)


def price_of(prices: Mapping[str, Any], model: str) -> ModelPrice:
    """Find the price of ``model`` in a price table.

    Args:
        prices: model id or glob -> price entry: a mapping or an object (the policy's
            `Price`) with ``input_usd_per_mtok`` and ``output_usd_per_mtok``.
        model: the model id (from the request or, better, from the response's ``model``).

    Raises:
        InputError: no entry matches ``model`` (field ``prices``), or an entry is malformed.

    """
    entry = prices.get(model)
    name = model
    if entry is None:
        candidates = [k for k in prices if fnmatch.fnmatchcase(model, k)]
        if candidates:
            name = max(candidates, key=len)
            entry = prices[name]
    if entry is None:
        known = ", ".join(sorted(prices)) or "none"
        raise InputError(f"no price for model {model!r} (known: {known})", field="prices")
    return ModelPrice(
        input_usd_per_mtok=_field(entry, _INPUT, name),
        output_usd_per_mtok=_field(entry, _OUTPUT, name),
    )


def estimate_usd(prices: Mapping[str, Any], model: str, tokens_in: int, tokens_out: int) -> float:
    """USD cost of ``tokens_in`` input and ``tokens_out`` output tokens of ``model``.

    Args:
        prices: the policy's price table (see `price_of`).
        model: model id.
        tokens_in: input tokens, >= 0.
        tokens_out: output tokens, >= 0.

    Returns:
        US dollars, ``(tokens_in * input + tokens_out * output) / 1e6``.

    Raises:
        InputError: ``model`` has no price, or its entry is malformed.
        ValueError: a negative token count.

    """
    if tokens_in < 0 or tokens_out < 0:
        raise ValueError(f"token counts must be >= 0, got {tokens_in} and {tokens_out}")
    price = price_of(prices, model)
    return (tokens_in * price.input_usd_per_mtok + tokens_out * price.output_usd_per_mtok) / 1e6


def call_usd(
    prices: Mapping[str, Any],
    tokens_in: int,
    tokens_out: int,
    answered_by: str | None,
    asked: str | None,
) -> float | None:
    """USD of one answered model call: the one rule every metered call is priced by.

    The model id the answer names wins; when the table has no price for it (a dated snapshot
    the table does not list), the model asked is priced instead.

    Args:
        prices: the policy's price table (see `price_of`).
        tokens_in: input tokens of the call, >= 0.
        tokens_out: output tokens of the call, >= 0.
        answered_by: the model id read from the answer, or None.
        asked: the model named in the request, or None.

    Returns:
        US dollars, or None when neither model is priced.

    Raises:
        ValueError: a negative token count.
    """
    for model in (answered_by, asked):
        if not model:
            continue
        try:
            return estimate_usd(prices, model, tokens_in, tokens_out)
        except InputError:
            continue
    return None
