"""A second Docker engine that cannot see this machine's paths (the Docker backend's copy mode).

A ``dockerd`` of its own (data root, exec root, pidfile, unix socket) started by ``unshare
--net --mount``: in a network namespace of its own (only a ``lo``; ``--bridge=none
--iptables=false`` touch nothing of the host's network, and never the main engine's ``docker0``)
and a mount namespace of its own in which tmpfs folders cover ``/work``, ``/tmp`` and
``/root``: the checkout (the runner package), the tests' temporary folders (state folders,
tool snapshots) and the home folder do not exist for that engine, as for a remote ``DOCKER_HOST``
or a dind service. Its folders live under ``/var/tmp``, which it does see. The sandbox image is
loaded into it with ``docker save | docker load`` (no registry here).

Started and stopped by `tests.support.dockerd.second_dockerd` (by its pid; its mount namespace,
with every mount it made, ends with it). Needs root and ``unshare``; fails under ``CI=true``
when unusable, skips otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.support.dockerd import Engine, second_dockerd

__all__ = ["HIDDEN", "IsolatedEngine", "isolated_engine"]

HIDDEN = ("/work", "/tmp", "/root")  # folders hidden from the engine

IsolatedEngine = Engine  # the engine's address (``unix://...``), its folder, its dockerd's pid


@contextlib.contextmanager
def isolated_engine(image: str) -> Iterator[IsolatedEngine]:
    """Start the engine with ``image`` loaded; stop it (by pid) and remove its folder on exit."""
    with second_dockerd(image, parent="/var/tmp", prefix="srpf-", hide=HIDDEN) as engine:
        yield engine
