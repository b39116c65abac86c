"""Host settings, read once by the CLI from the environment (prefix ``SANDBOX_REPLAY_``).

Nothing reads the environment at import time: the CLI builds one `Settings` and passes it down.
Resource limits left unset here come from the policy (SPEC.md: "Resource limits come from the
policy; settings and CLI flags override them for a run").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from runner.limitbounds import (
    Cpus,
    MaxCalls,
    MaxTraceMb,
    MemoryMb,
    PidsLimit,
    TimeoutS,
    TmpfsMb,
)

DEFAULT_IMAGE = "sandbox-replay:latest"
DEFAULT_BASE_IMAGE = "python:3.12-slim"
OFFLINE_BASE_IMAGE = "sandbox-replay-base:bookworm"


def _default_concurrency() -> int:
    """Default sandbox concurrency: 4, capped at 2x CPUs.

    DOCKER-NOTES.md: throughput saturates at concurrency 4 on 2 cores.
    """
    return max(1, min(4, 2 * (os.cpu_count() or 1)))


def _default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sandbox-replay``, else ``~/.cache/sandbox-replay`` (read when built)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sandbox-replay"


# A backend's name (`runner.backends.registry` holds the names; the settings sit below it).
BACKEND_NAME = r"^[a-z][a-z0-9-]{0,31}$"
# An OCI runtime's name as dockerd registers it (``--add-runtime NAME=PATH``).
RUNTIME_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Settings(BaseSettings):
    """Everything the host may configure without editing a policy, one section per component.

    The sections, in the class body as here: backends, state and scheduling, per-run limits,
    logging, model providers, tests.

    Attributes:
        docker_host: Docker engine address; None: the engine the docker CLI would use
            (``DOCKER_HOST``, the docker context, the platform socket, Podman's socket;
            `runner.backends.docker.engine`).
        host_files: how the runtime and the tool snapshot reach Docker sandboxes: ``bind``
            (read-only bind mounts of host folders), ``copy`` (runtime baked into an image,
            tools copied into volumes through the engine's API: engines that cannot see this
            host's paths), or ``auto`` (a probe decides; `runner.backends.docker.hostfiles`).
        backend: where sandboxes run when a command is given no ``--backend``
            (``SANDBOX_REPLAY_BACKEND``): a name of `runner.backends.registry` (``docker``,
            ``namespace``, ``ray``), checked there when a command chooses its backend (an
            unknown name: exit 2, the choices listed); here only its form.
        namespace_rootfs: a root filesystem folder the namespace backend uses for every run
            instead of exporting the image (the debootstrap tree of
            images/build-base-offline.sh, kept); None: the image's own, exported once.
        namespace_start: how the namespace backend starts a sandbox: ``zygote`` (forked from a
            pre-imported runtime, `runner.runtime.zygote`) or ``bwrap`` (one bwrap and one
            fresh interpreter per sandbox).
        image: the sandbox image runs use.
        runtime: the engine's OCI runtime for the Docker backend's sandboxes (HostConfig
            ``Runtime``: ``crun``, ``runsc`` for gVisor's kernel boundary, ...); None is the
            engine's default (``runc``). A name the engine lacks is refused when the backend
            connects, naming the runtimes it has (`runner.backends.docker.runtimes`).
        base_image: the Python base image the sandbox image is built FROM when it can be had.
        offline_base_image: tag of the base image built with debootstrap when no registry is
            reachable.
        pool: ``submit`` keeps a warm pool of Docker sandboxes, one per run slot, started
            before their runs (`runner.backends.warmpool.pool`); ``SANDBOX_REPLAY_POOL=0`` off.
        pool_idle_s: seconds a pooled sandbox waits for a run before it ends itself.
        state_dir: where traces, the ledger and job folders live.
        cache_dir: downloads kept between runs, e.g. the wheelhouses of ``image build
            --requirements`` (``cache_dir/wheelhouse/<target>``); default
            ``$XDG_CACHE_HOME/sandbox-replay``, else ``~/.cache/sandbox-replay``.
        concurrency: sandboxes running at once.
        timeout_s, memory_mb, pids_limit, cpus, tmpfs_mb, max_calls, max_trace_mb: per-run
            limits overriding the policy (``SANDBOX_REPLAY_MAX_CALLS=500``); None keeps the
            policy's value. The bounds are the policy's (`runner.policy.models.LIMIT_BOUNDS`).
        log_format: ``auto`` (console on a TTY, JSON otherwise), ``console`` or ``json``.
        log_level: the least severe log events shown (``debug`` ... ``error``; default
            ``warning``: info events are asked for with ``-v`` or this setting).
        openai_base_url: base URL of an OpenAI-compatible endpoint for the ``openai`` provider
            (None: the host's ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``).
        openai_api_key: its key (None: the host's ``OPENAI_API_KEY``); held on the host, never
            passed into a sandbox.
        openai_model: the model asked when a request names none (None: ``OPENAI_MODEL``).
        anthropic_base_url: base URL of the Messages API for the ``anthropic`` provider (None:
            the host's ``ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``).
        anthropic_api_key: its key (``SANDBOX_REPLAY_ANTHROPIC_API_KEY``; None: the host's
            ``ANTHROPIC_API_KEY``); held on the host, never passed into a sandbox.
        realdata_dir: public traces recorded by others, for tests (``../shared/realdata``).
    """

    model_config = SettingsConfigDict(env_prefix="SANDBOX_REPLAY_", extra="ignore")

    # One section per component, each field named ``SANDBOX_REPLAY_<FIELD>`` in the environment.
    # -- backends: where sandboxes run and from which image --
    docker_host: str | None = None
    host_files: Literal["auto", "bind", "copy"] = "auto"
    backend: str = Field(default="docker", pattern=BACKEND_NAME)
    namespace_rootfs: Path | None = None
    namespace_start: Literal["zygote", "bwrap"] = "zygote"
    image: str = DEFAULT_IMAGE
    runtime: str | None = Field(default=None, pattern=RUNTIME_NAME)
    base_image: str = DEFAULT_BASE_IMAGE
    offline_base_image: str = OFFLINE_BASE_IMAGE
    # -- state and scheduling: where a command keeps what it writes, how many runs at once --
    state_dir: Path = Path(".sandbox-replay")
    cache_dir: Path = Field(default_factory=_default_cache_dir)
    concurrency: int = Field(default_factory=_default_concurrency, ge=1)
    # -- per-run limits: each overrides the policy's value (runner.episode.limits) --
    timeout_s: TimeoutS | None = None
    memory_mb: MemoryMb | None = None
    pids_limit: PidsLimit | None = None
    cpus: Cpus | None = None
    tmpfs_mb: TmpfsMb | None = None
    max_calls: MaxCalls | None = None
    max_trace_mb: MaxTraceMb | None = None
    # -- logging (runner.cli.log) --
    log_format: Literal["auto", "console", "json"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    # -- model providers: endpoints and keys, held on the host (runner.providers) --
    openai_base_url: str | None = None
    openai_api_key: SecretStr | None = None
    openai_model: str | None = None
    anthropic_base_url: str | None = None
    anthropic_api_key: SecretStr | None = None
    # -- tests: public traces recorded by others --
    realdata_dir: Path = Path("../shared/realdata")
    # -- backends (continued): the Docker backend's warm pool --
    pool: bool = True
    pool_idle_s: float = Field(default=300.0, gt=10.0, le=86400.0)
