"""The Docker backend: the only code of the project that imports the docker SDK.

Modules:
    engine    which engine, chosen as the docker CLI chooses it (DOCKER_HOST, the docker
              context, the platform default, Podman's socket), and why: `discover_engine`
    client    connecting, translating SDK errors at one boundary, retrying idempotent calls
    frames    demultiplexing of the attach stream (pure)
    sandbox   one started container: attached stdio, kill, wait, exit state
    backend   `DockerBackend`: hardened create -> attach -> start -> remove; reaper; its warm
              pool (`runner.backends.warmpool`)
    image     building the sandbox image (``sandbox-replay image build [--offline]``); build:
              one ``docker build`` through the API
    hostfiles how the host's folders reach sandboxes: bind mounts, or copies (engines that
              cannot see this host): filetree (deterministic archives), runtimeimage (the
              runtime baked into an image of its own tag), filescheck (``doctor``'s check)
    checks    the engine's checks of ``sandbox-replay doctor`` (engine, runtimes, image,
              leftovers) and ``image smoke``
    doctor    ``doctor --backend docker``: every check in order (`diagnose`, the registry's hook)

The registry (`runner.backends.registry`) makes it with `DockerBackend.from_settings`
(`DockerBackend.connect`: ``docker_host``, ``runtime``, ``host_files``, ``session_id``);
`discover_engine` says which engine and why (also in ``backend.engine``); ``backend.files``
(`hostfiles.HostFiles`) the mode and why. The ``image`` commands use `image` and `checks`.

Importing this package imports the docker SDK (~0.14 s): import it where it is used.

May import: `runner.backends` (base, labels, timed_write), `runner.resources`, `runner.errors`
and docker.
"""

from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.client import connect, engine_address
from runner.backends.docker.engine import discover_engine

__all__ = ["DockerBackend", "connect", "discover_engine", "engine_address"]
