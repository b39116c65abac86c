"""May this workflow run here? The load gate, eligibility, and the tools described by a sandbox.

``eligibility`` (`check_eligibility`, its report in ``report``) walks every step of every
workflow and resolves each tool through the policy's capability-filtered registry; ``gate`` is
the load gate of ``run`` and ``submit`` (`read_gate`: the tools read from source, nothing run;
`sandbox_gate`: the eligibility check again on the sandbox's description). The host never
imports the code under evaluation: ``describe`` (`sandbox_registry`) locates the tool modules
without running them, asks a sandbox to import them (``describe_run``), reads the answer as
untrusted data (``answer``) and keeps it by the snapshot's digest in the state folder
(``cache``: one describing sandbox per snapshot, not per command); ``checkread`` is ``check``'s
describer (a sandbox only for an MCP server); ``onerun`` is a workflow admitted and run once
(``run`` and the anchored fork: `read_for_one_run`).

May import: `runner.episode` (the run folder and spec: ``prepare``, ``request``, ``channel``,
``driver``; the engine's limits and one metered run: ``limits``, ``metered_run``),
`runner.tools` (locate, static reading, the snapshot), `runner.backends` (the interface),
`runner.policy`, `runner.providers` (a workflow's model is checked as it will be built),
`runner.domain`, `runner.settings`, `runner.resources`, `runner.wire.protocol`, `runner.sdk`,
`runner.errors`; never submit, reproduce, runs or cli.
"""

from typing import TYPE_CHECKING

from runner.lazyexports import lazy_exports

# The surface is loaded name by name on first use (PEP 562), for start-up speed: importing
# one module of this package must not load the others (`check`, `--help`).
if TYPE_CHECKING:  # the same names, for mypy and import-linter
    from runner.admission.describe import MANIFEST_TIMEOUT_S, sandbox_registry
    from runner.admission.eligibility import EligibilityReport, check_eligibility
    from runner.admission.gate import Admission, admit, read_gate, sandbox_gate

__all__ = [
    "MANIFEST_TIMEOUT_S",
    "Admission",
    "EligibilityReport",
    "admit",
    "check_eligibility",
    "read_gate",
    "sandbox_gate",
    "sandbox_registry",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Admission": "runner.admission.gate",
        "EligibilityReport": "runner.admission.eligibility",
        "MANIFEST_TIMEOUT_S": "runner.admission.describe",
        "admit": "runner.admission.gate",
        "check_eligibility": "runner.admission.eligibility",
        "read_gate": "runner.admission.gate",
        "sandbox_gate": "runner.admission.gate",
        "sandbox_registry": "runner.admission.describe",
    },
)
