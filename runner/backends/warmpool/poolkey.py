"""What fixes a warm sandbox at creation (its `PoolKey`), the pool's size, a pooled spec.

Used by `runner.backends.warmpool.pool` (the rules are in its docstring): runs whose specs have
the same key can take each other's warm sandboxes; only a run's id and labels vary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from runner.backends import labels as L
from runner.backends.base import Mount, ResourceLimits, SandboxSpec
from runner.wire.env import ENV_IDLE_CAP

__all__ = ["PoolKey", "pool_key", "pool_size", "pooled_spec"]


@dataclass(frozen=True)
class PoolKey:
    """What a sandbox fixes at creation; runs of one key can take each other's warm sandboxes."""

    image: str
    command: tuple[str, ...]
    mounts: tuple[Mount, ...]
    env: tuple[tuple[str, str], ...]
    limits: ResourceLimits
    user: str
    workdir: str
    cap_s: int
    init: bool


def pool_key(spec: SandboxSpec) -> PoolKey:
    """The `PoolKey` of ``spec`` (all but its ``run_id`` and ``labels``)."""
    return PoolKey(
        image=spec.image,
        command=tuple(spec.command),
        mounts=tuple(spec.mounts),
        env=tuple(sorted(spec.env.items())),
        limits=spec.limits,
        user=spec.user,
        workdir=spec.workdir,
        cap_s=spec.hard_cap.whole_s,
        init=spec.init,
    )


def pool_size(concurrency: int) -> int:
    """Warm sandboxes kept per key: one per run slot (the admitted concurrency) plus one.

    The extra one covers a refill slower than a run (a start is ~0.5 s of engine time, several
    times that on a loaded machine, while a trivial run takes about as long): with it a run at
    concurrency 1 still finds one warm when the refill started by its predecessor is not done.
    """
    return max(1, int(concurrency)) + 1


def pooled_spec(template: SandboxSpec, pool_id: str, idle_cap_s: float) -> SandboxSpec:
    """The spec of a pooled sandbox of ``template``'s key, named and labelled by ``pool_id``.

    The run's cap (``SANDBOX_REPLAY_HARD_CAP_S``) is the template's, applied from ``start``;
    until then the idle cap (`ENV_IDLE_CAP`, whole seconds) holds. Of the template's labels
    only its ledger (`runner.backends.labels.LEDGER`: the state directory's, the same for every
    run of a pool) is kept, never a run's: the reaper of another ledger then leaves a dead
    host's pooled sandboxes to that ledger's own ``submit --resume``, which settles the runs
    bound to them from the engine's times (`runner.backends.docker.reaper`,
    `runner.episode.poolbindings`).
    """
    env = dict(template.env)
    env[ENV_IDLE_CAP] = str(max(1, math.ceil(idle_cap_s)))
    labels = {L.POOL: "1", **{k: v for k, v in template.labels.items() if k == L.LEDGER}}
    return replace(template, run_id=pool_id, labels=labels, env=env)
