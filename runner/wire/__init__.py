"""The host ↔ sandbox contract, imported by both sides: standard library only, Python 3.9+.

What crosses the boundary between the host (`runner.episode`, `runner.policy`, the importers,
the backends) and the in-sandbox runtime (`runner.runtime`) lives here, once, so that neither
side imports the other: the host never imports `runner.runtime` (a leaf nobody imports), and
the runtime never imports the host. Mounted into every sandbox with the other sandbox-side
packages (`protocol.SANDBOX_PACKAGES`).

Modules:
    protocol      the NDJSON messages both ways, the run spec's keys, the sizes, the mounted
                  packages and where they are (``RUNTIME_ROOT``, ``TOOLS_DIR``)
    argrules      the policy's argument rules: the runtime's call-time guard and the host's
                  evaluator (``policy diff``), with linearre (a rule's regular expression
                  searched in time linear in the text) and urlhost (the host a URL value reaches)
    errors        the runtime's errors as both sides name them (RecordedError, UnrecordedCall,
                  PureResultMismatch, ModelCallError, ...)
    toolrecord    `RuntimeTool`: one resolvable tool of a manifest, and its function spec
    env           the environment variables both sides set or read
    destinations  what makes two outbound attempts the same destination, and the cap
    zygote        the namespace backend's zygote channel: messages, descriptor order, limits

May import: the standard library, `runner.sdk`, `runner.trace` and `runner.errors`.
"""

__all__ = [
    "argrules",
    "destinations",
    "env",
    "errors",
    "linearre",
    "protocol",
    "toolrecord",
    "urlhost",
    "zygote",
]
