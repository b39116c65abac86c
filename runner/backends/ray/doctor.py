"""``sandbox-replay doctor --backend ray``: does the cluster authenticate, and is every node ready?

First the cluster is asked whether it authenticates its clients (``auth``, required: its GCS
and every raylet must refuse a client without a token or client certificate,
`runner.backends.ray.auth`); a cluster that does not is not joined, unless
``--unsafe-open-cluster`` makes the check a warning. Then the Docker backend's checks
(`runner.backends.docker.doctor.run_checks`) run on every node that advertises sandbox slots,
each against that node's own engine (its ``DOCKER_HOST``) and image; a node whose checks could
not run fails.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from runner.backends.docker.doctor import run_checks
from runner.backends.doctor import Check, Diagnosis, RunnerMounts
from runner.backends.ray.auth import AUTH_FIX, ClusterNotAuthenticated

if TYPE_CHECKING:
    from runner.backends.registry import BackendOptions
    from runner.settings import Settings

__all__ = ["diagnose"]


def diagnose(settings: Settings, options: BackendOptions, runner_mounts: RunnerMounts) -> Diagnosis:
    """The cluster's ``auth`` check, then `run_checks` on every node, each on its own engine.

    Returns:
        ``checks``: the ``auth`` check; ``nodes``: each node's checks, or the error text of a
        node whose checks failed to run (none when the cluster was not joined).

    Raises:
        InputError: the ray extra is missing or no address was given.
        InfrastructureError: the cluster is unreachable or has no sandbox slots.
    """
    # imported here: ray takes ~1 s to import, and the registry imports this module for
    # ``doctor`` before it knows the cluster is there
    from runner.backends.ray.backend import RayBackend

    allow_open = bool(options.flags.get("--unsafe-open-cluster", False))
    try:
        backend = RayBackend.from_settings(settings, options)
    except ClusterNotAuthenticated as exc:
        detail = "the cluster does not authenticate its clients: " + exc.verdict.describe()
        return Diagnosis([Check("auth", False, True, detail, AUTH_FIX)], nodes={})
    try:
        verdict = backend.auth
        check = Check("auth", verdict.authenticated, not allow_open, verdict.describe(), AUTH_FIX)
        node_run = functools.partial(run_checks, runner_mounts=runner_mounts)
        answers = backend.call_on_every_node(node_run, None, settings.image)
    finally:
        backend.close()
    nodes = {n: a if isinstance(a, list) else str(a) for n, a in answers.items()}
    return Diagnosis([check], nodes=nodes)
