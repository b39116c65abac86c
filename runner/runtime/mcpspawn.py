"""Put the MCP stand-in where an agent starts a workflow's MCP server. Standard library only.

Standard library only, Python 3.9+. Runs in the program's process (the worker,
`runner.runtime.worker.process`), before the program is imported. A workflow names its MCP
stdio servers (``tools: [{mcp: {command: [...]}}]``); an agent starts them itself (the ``mcp``
package's ``stdio_client``, the OpenAI Agents SDK's ``MCPServerStdio``: ``anyio.open_process``
→ ``asyncio`` → ``subprocess.Popen``). `install` wraps ``subprocess.Popen.__init__`` so that
starting exactly such a command starts ``python -m runner.runtime.mcpproxy -- COMMAND``
instead: the stand-in (`runner.runtime.mcpproxy`) that routes every request through the
runtime (`runner.runtime.mcphub`) and starts the real command only when the runtime says to
forward (never in ``reproduce``).

Why here and not in the ``mcp`` package: a transport-level stand-in covers every client of the
stdio transport (any ``mcp`` version, any SDK wrapping it, a client of its own) and records
what crossed the pipe, with one wrap of the one call every Python child start goes through;
patching ``ClientSession`` would tie the runtime to one package's internals and still leave
the server process to start. Why not the whole environment: only the commands the workflow
declares are replaced; every other child starts as before (and the audit hook logs it).

A command matches a server when its argument list equals the declared ``command``, or equals
it but for the directory of the program (``/usr/bin/python3`` for ``python3``). The stand-in's
environment is the one the agent gave the server (the ``mcp`` package passes only ``HOME``,
``PATH`` and a few more), plus what the runtime gives every Python child (``PYTHONPATH`` with
the runtime and its ``sitecustomize``, the egress log, the gateway address, the run's clock
reading, `runner.runtime.egress.audit.child_environment`): so the stand-in and the server it
starts load the audit hook and follow the run's clock (a server started during call *k* reads
call *k*'s reading for its whole life, `runner.sdk.wallclock`).
"""

import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence

from runner.runtime.mcphub import ENV_SERVERS, ENV_STANDIN

PASSED = (
    "SANDBOX_REPLAY_EGRESS_LOG",
    "SANDBOX_REPLAY_EGRESS_WITNESSED",
    "SANDBOX_REPLAY_GATEWAY",
    "SANDBOX_REPLAY_CLOCK",
)
"""Variables of this process the stand-in (and so its server) gets too."""
RUNTIME_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_state: Dict[str, Any] = {"servers": [], "original": None}


def matching(args: Any, servers: Sequence[Dict[str, Any]]) -> Optional[str]:
    """The label of the server whose command ``args`` is, or None."""
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        return None
    argv = [
        a if isinstance(a, str) else os.fsdecode(a) for a in args if isinstance(a, (str, bytes))
    ]
    if len(argv) != len(args) or not argv:
        return None
    for server in servers:
        command = server["command"]
        if len(command) != len(argv) or command[1:] != argv[1:]:
            continue
        if command[0] == argv[0] or os.path.basename(command[0]) == os.path.basename(argv[0]):
            return str(server["label"])
    return None


def standin_environment(env: Any, label: str) -> Dict[str, str]:
    """The stand-in's environment: the agent's ``env`` (or this process's) plus the runtime's."""
    base = dict(env) if isinstance(env, dict) else dict(os.environ)
    out = {os.fsdecode(k): os.fsdecode(v) for k, v in base.items()}
    out.pop(ENV_SERVERS, None)
    for name in PASSED:
        if os.environ.get(name):
            out[name] = os.environ[name]
    ours = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    ours.append(RUNTIME_ROOT)
    theirs = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(ours + theirs))
    gateway = os.environ.get("SANDBOX_REPLAY_GATEWAY", "")
    out[ENV_STANDIN] = json.dumps({"gateway": gateway, "server": label})
    return out


def standin_argv(args: Sequence[Any]) -> List[str]:
    """``python -m runner.runtime.mcpproxy -- ARGS``, with this process's interpreter."""
    return [sys.executable, "-m", "runner.runtime.mcpproxy", "--", *[os.fsdecode(a) for a in args]]


def install(servers: List[Dict[str, Any]]) -> None:
    """Start the stand-in in place of any of ``servers`` (``{label, command}``) from now on."""
    _state["servers"] = [
        s
        for s in servers
        if isinstance(s, dict)
        and isinstance(s.get("command"), list)
        and s["command"]
        and all(isinstance(c, str) for c in s["command"])
    ]
    if _state["original"] is not None or not _state["servers"]:
        return
    original = subprocess.Popen.__init__
    _state["original"] = original

    def __init__(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        label = matching(args, _state["servers"])
        if label is not None and not rest and not kwargs.get("shell"):
            kwargs["env"] = standin_environment(kwargs.get("env"), label)
            kwargs.pop("executable", None)
            args = standin_argv(args)
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]


def install_from_env() -> None:
    """`install` the servers named in `ENV_SERVERS`, when the runtime set it."""
    text = os.environ.get(ENV_SERVERS)
    if not text:
        return
    try:
        servers = json.loads(text)
    except ValueError:
        return
    if isinstance(servers, list):
        install(servers)
