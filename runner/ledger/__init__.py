"""Metering: the SQLite ledger of jobs, runs and charges, spend ceilings and prices.

Public surface (pinned by tests/unit/ledger/test_ledger.py):

- `Ledger` (``runner.ledger.store``): WAL SQLite under the state directory, versioned schema,
  idempotent writes, totals by purpose and job.
- `CeilingGuard` / `Budget` (``runner.ledger.ceilings``): atomic reservations per purpose.
- `Amount`, `Ceiling` (``runner.ledger.amounts``): values of spend and limits.
- `estimate_usd` (``runner.ledger.pricing``): USD from the policy's price table.
- `prompt_tokens_bound` (``runner.ledger.tokens``): the prompt tokens a request reserves.

May import: `runner.errors`, `runner.trace` (the episode statuses), the standard library
(sqlite3); nothing else of runner.
"""

from runner.ledger.amounts import PURPOSES, UNBOUNDED, ZERO, Amount, Ceiling, Purpose
from runner.ledger.ceilings import Budget, CeilingGuard, Headroom
from runner.ledger.pricing import ModelPrice, estimate_usd, price_of
from runner.ledger.records import (
    FINISHED_STATUSES,
    Job,
    PurposeTotals,
    Reservation,
    RunRecord,
    run_key,
)
from runner.ledger.reports import RunHistory
from runner.ledger.store import LEDGER_FILENAME, Ledger
from runner.ledger.tokens import prompt_tokens_bound, request_bytes

__all__ = [
    "FINISHED_STATUSES",
    "LEDGER_FILENAME",
    "PURPOSES",
    "UNBOUNDED",
    "ZERO",
    "Amount",
    "Budget",
    "Ceiling",
    "CeilingGuard",
    "Headroom",
    "Job",
    "Ledger",
    "ModelPrice",
    "Purpose",
    "PurposeTotals",
    "Reservation",
    "RunHistory",
    "RunRecord",
    "estimate_usd",
    "price_of",
    "prompt_tokens_bound",
    "request_bytes",
    "run_key",
]
