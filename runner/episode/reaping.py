"""The reaper's ledger side: a dead orchestrator's runs are charged what the engine measured.

Every command that talks to an engine first removes the leftovers of dead owners
(`runner.backends.base.Backend.reap`). Each reaped sandbox carries the ledger run it ran for
(label ``io.sandbox-replay.ledger-key``, set by `runner.episode.prepare.prepare_run`) and
the seconds the engine recorded between its start and its finish; `settle_reaped` charges the
run those seconds instead of its reservation (`runner.ledger.Ledger.settle_dead_run`). What
the reaper cannot measure (a container already gone, a model call in flight) stays reserved
until ``submit --resume`` closes the job: charged at the reservation and marked ``estimated``
(`runner.ledger.Ledger.close_orphans`).

Only the ledger of the command's own state directory is written: a label names a run key and
a ledger id (`ledger_id`), never a file; a key that is not in this ledger changes nothing, and
the reaper leaves a recent sandbox of another ledger to that ledger's commands.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from runner.backends import labels as L
from runner.backends import registry
from runner.backends.base import Backend, Reaped
from runner.episode.poolbindings import PoolBindings
from runner.hostlog import get_logger
from runner.ledger import LEDGER_FILENAME, Ledger

if TYPE_CHECKING:
    from runner.settings import Settings

log = get_logger(__name__)

B = TypeVar("B", bound=Backend)

__all__ = ["connect", "connect_here", "ledger_id", "reap_and_settle", "settle_reaped"]

MAX_KEY_CHARS = 1024


def ledger_id(state_dir: Path) -> str:
    """The id sandboxes carry for the ledger of ``state_dir`` (16 hex of its path's sha256)."""
    path = (Path(state_dir) / LEDGER_FILENAME).resolve()
    return hashlib.sha256(str(path).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def settle_reaped(ledger: Ledger, reaped: Sequence[Reaped]) -> int:
    """Charge each reaped sandbox's ledger run the seconds the engine measured.

    Args:
        ledger: the open ledger.
        reaped: what the reaper removed.

    Returns:
        How many open run charges were settled from a measurement.
    """
    settled = 0
    for sandbox in reaped:
        key = sandbox.labels.get(L.LEDGER_KEY)
        if not key or len(key) > MAX_KEY_CHARS or sandbox.sandbox_s is None:
            continue
        settled += ledger.settle_dead_run(key, sandbox.sandbox_s)
    if settled:
        log.info("dead_runs_settled_from_engine", runs=settled)
    return settled


def reap_and_settle(backend: Backend, state_dir: Path) -> list[Reaped]:
    """Reap leftovers of dead owners and settle their runs in ``state_dir``'s ledger.

    The ledger is opened only when it exists and something was reaped (no command creates a
    ledger just to reap).

    Raises:
        InfrastructureError: the engine failed while listing.
    """
    reaped = backend.reap(ledger=ledger_id(state_dir))
    if reaped:
        log.info("reaped_leftovers", count=len(reaped))
        path = Path(state_dir) / LEDGER_FILENAME
        if path.exists():
            with Ledger(path) as ledger:
                settle_reaped(ledger, PoolBindings(state_dir).settled(reaped))
    return reaped


def connect(make: Callable[[], B], state_dir: Path) -> B:
    """A command's backend: made by ``make``, then the leftovers of dead owners reaped.

    The one way ``run``, ``reproduce`` and ``packet`` open a backend, whichever it is (Docker,
    namespace; ``submit`` reaps with its job's open ledger, `runner.submit.job`). The backend
    is closed again when reaping fails.

    Args:
        make: makes the backend (connects to its engine).
        state_dir: whose ledger the reaped runs are settled in.

    Raises:
        InfrastructureError: the engine is unreachable, or failed while listing.
    """
    backend = make()
    try:
        reap_and_settle(backend, state_dir)
    except BaseException:
        backend.close()
        raise
    return backend


def connect_here(settings: Settings) -> Backend:
    """The settings' backend of this machine, connected and reaped (`connect`).

    The backend is `runner.backends.registry.here`'s.

    Raises:
        InputError: the setting names no backend (exit 2).
        InfrastructureError: the engine is unreachable, or failed while listing.
    """
    chosen = registry.here(settings)
    return connect(lambda: chosen.make(settings), settings.state_dir)
