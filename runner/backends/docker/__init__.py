"""The Docker backend: the only code of the project that imports the docker SDK.

Modules:
    client    connecting, translating SDK errors at one boundary, retrying idempotent calls
    frames    demultiplexing of the attach stream (pure)
    sandbox   one started container: attached stdio, kill, wait, exit state
    backend   `DockerBackend`: hardened create -> attach -> start -> remove; reaper
    pool      `WarmPool`: sandboxes started before their runs, each handed out once
    poolkey   what fixes a warm sandbox at creation (`PoolKey`), the pool's size, its spec
    pooled    `PooledBackend`: the Docker backend behind a warm pool (``submit``)
    image     building the sandbox image (``sandbox-replay image build [--offline]``)
    checks    the engine/image/hardening checks of ``sandbox-replay doctor``

Importing this package imports the docker SDK (~0.14 s): import it where it is used.

May import: `runner.backends` (base, labels, timed_write), `runner.resources`, `runner.errors`
and docker.
"""

from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.client import connect, engine_address

__all__ = ["DockerBackend", "connect", "engine_address"]
