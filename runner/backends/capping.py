"""The lifetime cap and environment of a sandbox's PID 1, shared by the sandboxing backends.

Every sandboxing backend (Docker, namespaces) starts a sandbox's command the same way
(`runner.backends.base.LifetimeCap`): a command that is the sandbox's init
(``SandboxSpec.init``: the runtime, `runner.runtime.pid1`) runs as PID 1 with its cap in
`CAP_ENV`; any other command runs under coreutils ``timeout -s KILL N`` as PID 1
(`capped_command`: the image's execute-only copy `CAP_PROGRAM` when present, else
``timeout``), its only child the command. ``HOME`` and ``TMPDIR`` are the sandbox's own tmpfs
(`sandbox_environment`). Why PID 1 must be the cap or the runtime:
`runner.backends.docker.hardening`.
"""

from __future__ import annotations

from runner.backends.base import SandboxSpec
from runner.wire.env import ENV_HARD_CAP

__all__ = ["CAP_ENV", "CAP_PROGRAM", "SANDBOX_TMP", "capped_command", "sandbox_environment"]

SANDBOX_TMP = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not a host path
# An execute-only (mode 0111) copy of coreutils timeout in the image (images/Dockerfile): a
# process that runs a file it cannot read is not dumpable, so no same-uid process can ptrace
# it. Images built before it existed fall back to ``timeout`` (the cap still holds against
# signals, not against ptrace).
CAP_PROGRAM = "/usr/local/sbin/sandbox-replay-cap"
# The variable an init command reads its cap from (the runtime as PID 1: runner.runtime.pid1).
CAP_ENV = ENV_HARD_CAP
CAP_SCRIPT = (
    f'c={CAP_PROGRAM}; [ -x "$c" ] || c=timeout; '
    'command -v "$c" >/dev/null 2>&1 || { echo "sandbox-replay: the sandbox image has no'
    ' coreutils timeout, which enforces the sandbox lifetime cap" >&2; exit 125; }; '
    # the shell's own variables (dash exports PWD) must not reach the command: env -u
    'exec env -u PWD -u OLDPWD -u SHLVL -u _ "$c" -s KILL "$0" "$@"'
)


def capped_command(spec: SandboxSpec) -> list[str]:
    """The sandbox's argv: ``spec.command`` under its hard lifetime cap, PID 1 ``timeout``.

    ``/bin/sh`` picks the cap program (`CAP_PROGRAM`, else ``timeout``) and ``exec``s it
    through ``env -u`` (which drops the variables the shell itself set), so PID 1 is the cap
    itself and the command its only child: ``timeout -s KILL N COMMAND...`` with ``N`` =
    ``spec.hard_cap.whole_s``. An image without either exits 125 with a message. A command
    that is the sandbox's init (``spec.init``) runs as it is: it enforces the cap itself.
    """
    if spec.init:
        return list(spec.command)
    return ["/bin/sh", "-c", CAP_SCRIPT, str(spec.hard_cap.whole_s), *spec.command]


def sandbox_environment(spec: SandboxSpec) -> dict[str, str]:
    """The spec's part of the environment inside: HOME and TMPDIR on the tmpfs, then its own.

    An init command (``spec.init``) also gets its lifetime cap in `CAP_ENV` (whole seconds).
    """
    env = {"HOME": SANDBOX_TMP, "TMPDIR": SANDBOX_TMP, **spec.env}
    if spec.init:
        env[CAP_ENV] = str(spec.hard_cap.whole_s)
    return env
