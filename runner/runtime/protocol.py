"""The NDJSON protocol between the host and the in-sandbox runtime (standard library only).

One JSON object per line, UTF-8, ``\\n``-terminated, each with a ``type``. The runtime speaks on
its own copies of the container's stdin/stdout file descriptors; tool code sees ``/dev/null``
as stdin and stderr as stdout, so nothing it prints or reads touches the channel.

Files mounted read-only into the sandbox (``RUN_DIR``):
    ``manifest.json``  the capability-filtered registry manifest:
                       ``{"tools": [manifest entries of runner.sdk.ToolDef], "policy": {...}}``
    ``run.json``       the run spec (`RUN_SPEC_KEYS`): ``run_id``, ``mode`` (``shadow`` |
                       ``reproduce``), ``workflow`` (the normalised workflow as JSON),
                       ``workflow_source`` (file content), ``task`` (the task record),
                       ``clock`` (``{"start": epoch_s, "step_s": s}``), ``seed``,
                       ``recorded_calls`` (reproduce: the trace's call records), ``tool_paths``
                       (folders inside the sandbox to put on ``sys.path``), ``modules``.

Runtime -> host:
    hello          {protocol, python, pid, platform?, packages?}      first message, always
                   (additive, asked by the host side, H4: ``platform`` e.g.
                   ``linux-x86_64-glibc2.36`` and ``packages`` ``{dist name: version}`` of
                   the sandbox's interpreter (importlib.metadata) go into the trace header's
                   environment manifest; absent keys are recorded as null / {})
    step           {step_id, state: started|finished|failed|not_run}  progress
    call           {record}                                           one trace ``call`` record
    model_request  {id, role: model|user, request}                    waits for model_response
    egress         {attempt: {kind, host, address, port, resolved_from, outcome, pid}}
    coverage       {partial: true, reason, program|library}           log completeness
    meter          {tokens_in, tokens_out}
    episode        {status, output, error, not_run, failure}          last, before exit
    error          {class, message}                                   the runtime itself failed

Host -> runtime:
    start          {protocol}                                         go (after hello)
    model_response {id, body, model, usage, error?}                   answer to model_request
    shutdown       {}                                                 exit now (no EOF needed)
"""

import json
from typing import Any, Dict

PROTOCOL_VERSION = 1

RUN_DIR = "/sandbox/run"
RUNTIME_ROOT = "/opt/sandbox-replay"
TOOLS_DIR = "/sandbox/tools"

RUN_SPEC_KEYS = ("run_id", "mode", "workflow", "workflow_source", "task", "clock", "seed",
                 "recorded_calls", "tool_paths", "modules")

# Upper bound of one protocol line, bytes. The host reports a longer line as
# ``message_too_large`` (with its size) and keeps parsing what follows.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

MESSAGE_TYPES_FROM_RUNTIME = frozenset(
    {"hello", "step", "call", "model_request", "egress", "coverage", "meter", "episode", "error",
     "divergence"})  # divergence: sent by runtime/calls.py; the host lists them in the end line
MESSAGE_TYPES_FROM_HOST = frozenset({"start", "model_response", "shutdown"})


def encode(message: Dict[str, Any]) -> bytes:
    """One protocol line for ``message`` (a dict with a ``type``), UTF-8 with ``\\n``.

    Lone surrogates (undecodable bytes carried by ``surrogateescape``) are kept reversibly as
    JSON escapes (``ensure_ascii=True``), so the writer never fails on them.

    Raises:
        ValueError: no ``type``, or a value JSON cannot represent.
    """
    if "type" not in message:
        raise ValueError("protocol message without a type")
    return (json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
            + "\n").encode("ascii")


def decode(line: bytes) -> Dict[str, Any]:
    """Parse one protocol line (without or with its ``\\n``).

    Raises:
        ValueError: not UTF-8 JSON, not an object, or no string ``type``.
    """
    message = json.loads(line.decode("utf-8"))
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValueError("protocol line is not an object with a type")
    return message
