"""The ``run`` and ``record`` use cases: one episode of a workflow on one task.

``run`` (`execute_run`): the load gate, the tool snapshot, the registry described in a
sandbox, one run charged under ``replay``. ``record`` (`record_run`): the workflow run live
and unsandboxed in a local process, charged under ``live``, its trace written.

May import: `runner.admission`, `runner.episode`, `runner.tools` and the packages below them;
never another use case (`runner.submit`, `runner.reproduce`, `runner.importers`) or the CLI.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

# Loaded on first use (PEP 562): `run` must not load `record`'s unsandboxed backend.
if TYPE_CHECKING:  # the same names, for mypy and import-linter
    from runner.runs.record import record_run
    from runner.runs.run import execute_run

__all__ = ["execute_run", "record_run"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"execute_run": "runner.runs.run", "record_run": "runner.runs.record"}
)
