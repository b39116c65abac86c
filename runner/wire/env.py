"""The environment variables host and sandbox share (names only). Standard library only.

Each is set by one side and read by the other (or by both sides' tests); the modules that act on
them keep their rules: `runner.runtime.pid1` (the caps), `runner.runtime.worker` (the witness, how
the worker starts), `runner.runtime.steps.gateway` and `runner.runtime.egress.audit` (the model
gateway's address, which the audit hook exempts).
"""

__all__ = ["ENV_GATEWAY", "ENV_HARD_CAP", "ENV_IDLE_CAP", "ENV_WITNESS", "ENV_WORKER_START"]

ENV_HARD_CAP = "SANDBOX_REPLAY_HARD_CAP_S"
"""The runtime's lifetime cap as PID 1, whole seconds (set by every backend for an init spec)."""

ENV_IDLE_CAP = "SANDBOX_REPLAY_IDLE_CAP_S"
"""A pooled sandbox's cap while it waits for its run (set by the warm pool; unset: not pooled)."""

ENV_WITNESS = "SANDBOX_REPLAY_EGRESS_WITNESS"
"""``off``: the worker runs without the seccomp egress witness, the audit hook alone (``record``'s
local process, whose tools reach the network as in production; the hook's own tests)."""

ENV_WORKER_START = "SANDBOX_REPLAY_WORKER_START"
"""``exec``: the worker is a fresh interpreter instead of a fork of the runtime (tests, bench)."""

ENV_GATEWAY = "SANDBOX_REPLAY_GATEWAY"
"""The model gateway's loopback address, set by the runtime for a program step's processes."""
