"""The host side of one sandbox run: prepare, drive the channel, classify, write the trace.

`prepare_run` writes the run folder and the `SandboxSpec` (only the sandbox-side packages of
runner are mounted: `runner_mounts`); `run_episode` drives the NDJSON channel (``channel``),
keeps what the host learns (``state``) and classifies the status (``status``);
``metered_run.metered_run`` is the reservation, run and settlement of one run that commands
compose; `sandbox_registry` describes the tools of a workflow by asking a sandbox
(``toolmanifest``); `record_run` runs a workflow live, unsandboxed (``record``).

May import: `runner.providers`, `runner.backends` (the interface; the Docker backend is passed
in), `runner.ledger`, `runner.policy`, `runner.domain`, `runner.tracetools`, `runner.settings`,
`runner.resources`, `runner.runtime.protocol`, `runner.sdk`, `runner.trace`, `runner.errors`;
never submit, reproduce, importers or cli.
"""

from runner.episode.driver import run_episode
from runner.episode.metered_run import MeteredRun
from runner.episode.prepare import prepare_run, runner_mounts
from runner.episode.record import record_run
from runner.episode.request import EpisodeRequest, EpisodeResult, PreparedRun
from runner.episode.toolmanifest import locate_tools, sandbox_registry

__all__ = [
    "EpisodeRequest",
    "EpisodeResult",
    "MeteredRun",
    "PreparedRun",
    "locate_tools",
    "prepare_run",
    "record_run",
    "run_episode",
    "runner_mounts",
    "sandbox_registry",
]
