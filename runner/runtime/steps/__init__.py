"""The steps of a workflow, in order: tool steps, agent steps, program steps, the gateway.

Standard library only, Python 3.9+; mounted into sandboxes.

Modules: ``engine`` (steps in order, step progress, episode status), ``agent`` (the model loop
through the host, tool dispatch, the simulated user), ``program`` (a user's own agent code with
guarded tools), ``gateway`` (the loopback model gateway a program calls), ``apicall`` (one
model-API request through the host).

May import: the standard library, `runner.runtime.replay`, the runtime's top-level modules
(errors, registry, template), `runner.sdk`, `runner.trace` and `runner.errors`.
"""

__all__ = ["engine"]
