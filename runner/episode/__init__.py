"""The host side of one sandbox run: prepare, drive the channel, classify, write the trace.

`prepare_run` writes the run folder and the `SandboxSpec` of an `EpisodeRequest` (``prepare``,
``request``; only the sandbox-side packages of runner are mounted: `runner_mounts`);
`run_episode` drives the NDJSON channel (``driver``, ``channel``), keeps what the host learns
(``state``: the gateway's requests ``gatewayturns`` with their checks and messages
``gatewayhost``, the egress log ``outbound``), classifies the
status (``status``) and writes the header and end line (``tracelines``);
``metered_run`` is the reservation, run and settlement of one run that every use case
composes; ``limits`` the per-run limits in effect; ``reaping`` the ledger side of the reaper.
The tool snapshot it mounts is `runner.tools.snapshot`'s; the use cases that run episodes are
`runner.runs`, `runner.submit` and `runner.reproduce`, the tool description `runner.admission`.

May import: `runner.tools`, `runner.providers`, `runner.backends` (the interface and the
registry; a concrete backend is passed in or made by name), `runner.ledger`, `runner.policy`,
`runner.grading`, `runner.domain`, `runner.tracetools`, `runner.settings`, `runner.resources`,
`runner.wire` (protocol, the destination key), `runner.sdk`, `runner.trace`, `runner.errors`;
never admission, runs, submit, reproduce,
importers or cli.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

# The surface is loaded name by name on first use (PEP 562), for start-up speed: importing
# one module of this package must not load the others (`check`, `--help`).
if TYPE_CHECKING:  # the same names, for mypy and import-linter
    from runner.episode.driver import run_episode
    from runner.episode.metered_run import MeteredRun
    from runner.episode.prepare import prepare_run, runner_mounts
    from runner.episode.request import EpisodeRequest, EpisodeResult, PreparedRun

__all__ = [
    "EpisodeRequest",
    "EpisodeResult",
    "MeteredRun",
    "PreparedRun",
    "prepare_run",
    "run_episode",
    "runner_mounts",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "EpisodeRequest": "runner.episode.request",
        "EpisodeResult": "runner.episode.request",
        "MeteredRun": "runner.episode.metered_run",
        "PreparedRun": "runner.episode.request",
        "prepare_run": "runner.episode.prepare",
        "run_episode": "runner.episode.driver",
        "runner_mounts": "runner.episode.prepare",
    },
)
