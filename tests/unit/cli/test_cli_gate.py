"""The gate is quick: ``--help`` and ``check`` import only what they use.

Each case runs the console script's `main` in a fresh interpreter and then lists the modules in
``sys.modules``: a regression (a top-level import of the Docker SDK, httpx, the episode driver...)
fails here deterministically, on any machine load, where a timed test would flake. The figures
themselves are printed by ``bench/bench_check.py`` (check wall ÷ ``python -c pass``).

What stays loaded, and why: ``--help`` renders with rich (typer's rich help, markdown-it
included); ``check`` validates its options with pydantic (typer 0.29's coercion) and reads YAML.
It builds only its own command (``runner.cli.commands.register``), builds no `Settings` when the
environment sets none (``runner.cli.lazysettings``) and imports structlog only when a line is
logged (``runner.hostlog``): on success it logs nothing at the default level.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO

HELPDESK = REPO / "examples" / "helpdesk"

# Never needed by `--help` or by `check` of a workflow without an MCP server.
NEVER = [
    "docker",
    "requests",
    "httpx",
    "ray",
    "anthropic",
    "openai",
    "sqlite3",
    "tenacity",
    # the registry (`runner.backends.registry`, standard library only) loads for ``--backend``'s
    # names and help; the interface and every backend stay unloaded
    "runner.backends.base",
    "runner.backends.docker",
    "runner.backends.namespace",
    "runner.backends.ray",
    "runner.backends.unsandboxed",
    "runner.episode.driver",
    "runner.admission.describe",
    "runner.providers.factory",
    "runner.ledger",
    "runner.tracetools",
    "runner.submit",
    "runner.reproduce",
    "runner.importers",
    "runner.grading",
]
# `--help` parses nothing and reads no file.
HELP_NEVER = [
    *NEVER,
    "pydantic",
    "pydantic_settings",
    "structlog",
    "yaml",
    "asyncio",
    "runner.settings",
    "runner.domain",
    "runner.policy",
    "runner.episode",
]
# Modules of the commands that were not invoked: the CLI builds only the command it runs.
OTHER_COMMANDS = [
    f"runner.cli.commands.{name}"
    for name in ("submit", "run", "doctor", "image", "record", "reproduce", "view", "report")
]
# `check` shows no help and logs nothing on success: structlog (and the part of rich that
# `structlog.dev` loads) is imported on the first log call (`runner.hostlog`), never at import.
CHECK_NEVER = [
    *NEVER,
    *OTHER_COMMANDS,
    "typer.rich_utils",
    "rich",
    "markdown_it",
    "structlog",
    # the environment sets no setting (`_loaded` clears them): no Settings are built
    "pydantic_settings",
    "runner.settings",
    "runner.domain.tasks",  # runner.domain's names load on first use (lazy_exports)
    "logging",  # runner.hostlog spells the level numbers; structlog would import it
]

_PROBE = """
import json, sys
sys.argv = ["sandbox-replay", *json.loads(sys.argv[1])]
from runner.cli.entry import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stdout.flush()
print("\\n" + json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _loaded(*args: str) -> tuple[int, set[str]]:
    """Run the CLI with ``args`` in a fresh interpreter: its exit code and its sys.modules.

    The environment sets no ``SANDBOX_REPLAY_`` variable, a user's usual state.
    """
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SANDBOX_REPLAY_")}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HELPDESK,
        env=env,
        check=False,
    )
    last = proc.stderr.strip().splitlines()[-1]
    result = json.loads(last)
    return int(result["exit"] or 0), set(result["modules"])


@pytest.mark.parametrize(
    ("args", "never", "exit_code"),
    [
        (("--help",), HELP_NEVER, 0),
        (("check", "v1.yaml"), CHECK_NEVER, 0),
        (("check", "v3.yaml"), CHECK_NEVER, 3),  # the ineligible verdict loads nothing more
    ],
    ids=["help", "check-eligible", "check-ineligible"],
)
def test_the_gate_leaves_heavy_modules_unimported(
    args: tuple[str, ...], never: list[str], exit_code: int
) -> None:
    code, modules = _loaded(*args)
    assert code == exit_code
    loaded = [name for name in never if name in modules]
    assert loaded == [], f"{' '.join(args)} imported {loaded}"


def test_the_probe_sees_a_heavy_import() -> None:
    """Control: a command that does use the engine's SDK shows it (the probe can fail)."""
    _, modules = _loaded("doctor", "--json")
    assert "docker" in modules
