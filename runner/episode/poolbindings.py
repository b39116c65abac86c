"""Which run a pooled sandbox was given: the reaper's way to charge a dead host's pooled runs.

A warm-pool sandbox (`runner.backends.warmpool.pool`) is created before its run is known, so it
carries no ledger key label (only its job's ledger, `runner.backends.warmpool.poolkey.
pooled_spec`), and Docker cannot add a label later. When the pool hands one to a
run, `PoolBindings.bind` writes ``<state>/pool/<container name>.json``: the run's ledger key and
ledger id and the seconds the sandbox waited unassigned. The binding is removed when the run's
sandbox is removed (`PoolBindings.release`). A binding left behind (the host died mid-run) is
read back when the reaper removes that container (`PoolBindings.settled`): the reaped entry gets
the run's ledger labels, and its engine-measured seconds lose the idle wait, so that
`runner.episode.reaping.settle_reaped` charges the run what it ran, as for an unpooled one.

The file's name goes through the id rules (`runner.domain.ids.path_for_id`); its content is
read bounded and strictly; a bad or missing binding changes nothing (the run stays reserved
until ``submit --resume`` closes it as estimated).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.backends import labels as L
from runner.backends.base import Reaped
from runner.domain.ids import path_for_id
from runner.errors import InputError
from runner.hostlog import get_logger

log = get_logger(__name__)

__all__ = ["PoolBindings"]

MAX_BINDING_BYTES = 4096


class PoolBindings:
    """The bindings of pooled sandboxes to runs, under ``<state_dir>/pool``.

    Args:
        state_dir: the command's state folder (whose ledger the runs are in).
    """

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir).resolve() / "pool"

    def _path(self, name: str) -> Path:
        return path_for_id(self.root, name, suffix=".json", kind="container name")

    def bind(self, name: str, labels: Mapping[str, str], idle_s: float) -> None:
        """Record that container ``name`` runs the run of ``labels`` after ``idle_s`` idle.

        Only runs with a ledger key are recorded (nothing else is charged). Never raises: a
        binding that cannot be written only loses the measurement of a crash.
        """
        key = labels.get(L.LEDGER_KEY)
        if not key:
            return
        record = {"ledger_key": key, "ledger": labels.get(L.LEDGER), "idle_s": round(idle_s, 3)}
        try:
            path = self._path(name)
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(record), encoding="utf-8")
            os.replace(tmp, path)
        except (OSError, InputError) as exc:
            log.warning("pool_binding_not_written", container=name, error=str(exc))

    def release(self, name: str) -> None:
        """Forget container ``name``'s binding (its run ended on this host)."""
        with contextlib.suppress(OSError, InputError):
            self._path(name).unlink(missing_ok=True)

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            path = self._path(name)
            with path.open("rb") as handle:
                data = handle.read(MAX_BINDING_BYTES + 1)
            if len(data) > MAX_BINDING_BYTES:
                return None
            record = json.loads(data.decode("utf-8"))
        except (OSError, InputError, ValueError):
            return None
        if not isinstance(record, dict) or not isinstance(record.get("ledger_key"), str):
            return None
        idle = record.get("idle_s")
        if not isinstance(idle, int | float) or not math.isfinite(idle) or idle < 0:
            return None
        return record

    def settled(self, reaped: Sequence[Reaped]) -> list[Reaped]:
        """``reaped`` with each pooled sandbox's run labels and run seconds from its binding.

        A pooled sandbox never assigned (no binding) is returned as it is; so is anything else.
        """
        out: list[Reaped] = []
        for entry in reaped:
            record = self._read(entry.name) if entry.labels.get(L.POOL) == "1" else None
            if record is None:
                out.append(entry)
                continue
            labels = dict(entry.labels)
            labels[L.LEDGER_KEY] = record["ledger_key"]
            if isinstance(record.get("ledger"), str):
                labels[L.LEDGER] = record["ledger"]
            seconds = entry.sandbox_s
            if seconds is not None:
                seconds = round(max(0.0, seconds - float(record["idle_s"])), 3)
            out.append(replace(entry, labels=labels, sandbox_s=seconds))
            self.release(entry.name)
        return out
