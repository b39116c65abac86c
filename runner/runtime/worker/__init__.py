"""The worker process: tool functions and program steps run there, never in the runtime.

Standard library only, Python 3.9+; mounted into sandboxes. The runtime (PID 1 of the sandbox,
`runner.runtime.pid1`) keeps the host channel and the episode record; it starts one worker per
run (same uid, no capability) and talks to it over two pipes with the channel's own framing
(`runner.runtime.channel.Channel`: whole lines, strict decoding, a bounded reader). The
call-time guard (the registry, the declared toolsets of program steps) and every call record
are on the runtime's side; what the worker answers is checked and only then used.

Modules: ``spawn`` (starting it: pipes, session, the witness's bootstrap socket; ``fork``: as a
fork of the runtime), ``client`` (the runtime's end: requests, violations), ``process`` (the
worker's end: imports tool modules, runs tools and programs), ``wire`` (what may cross: results,
errors, raw HTTP exchanges).

The egress witness: the worker's first act is to install the seccomp filter on
itself over a bootstrap socket (`process.install_witness`); the runtime answers it
(`client.Worker.spawn` starts `runner.runtime.egress.witness.serve`; `client.Worker.
witness_coverage` says whether it runs). `process.before_user_code` then runs, before any
user module is imported; a function appended to `process.BEFORE_USER_CODE` runs there.

May import: the standard library, the runtime's modules, `runner.sdk`, `runner.trace` and
`runner.errors`.
"""

__all__ = ["client", "process", "wire"]
