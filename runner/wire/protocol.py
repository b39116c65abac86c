r"""The NDJSON protocol between the host and the in-sandbox runtime (standard library only).

One JSON object per line, UTF-8, ``\\n``-terminated, each with a ``type``. The runtime speaks on
its own copies of the container's stdin/stdout file descriptors; tool code sees ``/dev/null``
as stdin and stderr as stdout, so nothing it prints or reads touches the channel.

The run travels in the host's ``start`` message (a warm pool starts sandboxes before
their run is known, so nothing of the run is fixed when the sandbox is created); there is no run
folder. ``start`` carries, besides ``protocol``:
    ``manifest``       the capability-filtered registry manifest:
                       ``{"tools": [manifest entries of runner.sdk.ToolDef], "policy": {...}}``
                       (``policy.rules``: the argument rules, `runner.wire.argrules`)
    ``run``            the run spec (`RUN_SPEC_KEYS`): ``run_id``, ``mode`` (``shadow`` |
                       ``reproduce``), ``workflow`` (the normalised workflow as JSON),
                       ``workflow_source`` (file content), ``task`` (the task record),
                       ``clock`` (``{"start": epoch_s, "step_s": s}``), ``seed``,
                       ``recorded_calls`` (reproduce: the trace's call records; an anchored
                       fork: its prefix), ``fork_at`` (null, or an anchored fork's call count:
                       calls before it are served and verified from ``recorded_calls``, the
                       rest run fresh under mode ``shadow``), ``tool_paths``
                       (folders inside the sandbox to put on ``sys.path``), ``modules``,
                       ``deadline_s`` (the run's timeout, seconds from the runtime's start:
                       the runtime's watchdog ends the run a grace after it, containment when
                       the host is gone; absent or null: no watchdog).
The whole ``start`` line is at most `MAX_START_BYTES` (the runtime discards a longer line
unparsed; the host refuses to send one) and both values are checked by the runtime exactly as
the files were (`runner.runtime.main.check_run_spec`).

Runtime -> host:
    hello          {protocol, python, pid, platform?, packages?}      first message, always
                   (additive, asked by the host side, H4: ``platform`` e.g.
                   ``linux-x86_64-glibc2.36`` and ``packages`` ``{dist name: version}`` of
                   the sandbox's interpreter (as importlib.metadata lists them; read by
                   runner.runtime.environment) go into the trace header's
                   environment manifest; absent keys are recorded as null / {});
                   ``isolation`` {pid1, dumpable, problem?} (additive): whether the
                   runtime is the sandbox's init and not dumpable (runner.runtime.pid1)
    step           {step_id, state: started|finished|failed|not_run}  progress
    call           {record}                                           one trace ``call`` record
    model_request  {id, role: model|user, request}                    waits for model_response
    egress         {attempt: {kind, host, address, port, resolved_from, outcome, pid}}
    coverage       {partial: true, reason, program|library}           log completeness
    meter          {tokens_in, tokens_out}
    episode        {status, output, error, not_run, failure}          last, before exit
    error          {class, message}                                   the runtime itself failed

Host -> runtime:
    start          {protocol, run, manifest}                          the run (after hello)
    model_response {id, body, model, usage, error?}                   answer to model_request
    shutdown       {}                                                 exit now (no EOF needed)

Additions by the runtime side (H3; all additive, older readers may ignore them):
    model_request  also carries ``index`` (the call index the turn will have) and ``step_id``.
                   ``request`` is the OpenAI Chat Completions shape: ``model``, ``messages``,
                   ``tools`` (function format, ``name`` = tool id), then the workflow's
                   ``model.settings`` as top-level keys (settings = everything but messages
                   and tools).
    call           ``record`` is a complete trace call line (``v``, ``type``: ``call``, ...,
                   docs/trace.schema.json). A difference from the recording that does not stop
                   the call (reproduce: a pure tool's other result, other arguments, a call
                   the trace never saw, a served call with no recording) is sent at once as
    divergence     {kind, index, tool, message, args?, nearest?, differing?, recorded?}
                   (kind: unrecorded_call | arguments | pure_result) and also kept in the call
                   record's ``meta.divergence`` (a list); a served call with no recording also
                   has ``error`` (``runner.wire.errors.UnrecordedCall``).
    egress         ``attempt`` may also hold ``event`` (audit event name), ``transport``
                   (tcp|udp), ``family`` (unix), ``url``, ``method``; the message has
                   ``child: true`` when a child process logged it. ``outcome`` is always
                   ``"attempted"`` (an audit hook runs before the operation).
                   item 11: ``count`` (default 1) is how many attempts at that destination
                   (kind, host or else address, port) the message stands for; the first one
                   of a destination carries its full attempt, later ones only the key fields.
                   ``{"type": "egress", "dropped": n, "cap": c}`` (no ``attempt``): n
                   attempts at destinations past the sandbox's cap of c distinct ones.
    coverage       ``{partial: true, reason, program?, argv?, library?, symbol?, pid?,
                   child?, clock?}``. ``partial: false`` is a clock-only note (a
                   child or foreign code under the egress witness reads the machine's clock;
                   its network calls are witnessed): it leaves the coverage ``full``.
    episode        ``status`` is one of succeeded | failed | denied; ``failure`` is
                   ``{call_index, tool, error_class}`` (``call_index`` -1 when no call ran).
                   ``oom_kills`` (additive, absent when unknown): processes of the
                   sandbox the kernel's OOM killer ended during the run, read from the
                   sandbox's memory cgroup (runner.runtime.oomcount).
    error          also ``traceback`` (text, last 8000 characters); the exit code is 70.
    nondeterminism {entries: [{kind, what, count, site?, via?, present?}], dropped}: mode
                   reproduce, once, before ``episode``: what the user's code read that the
                   trace does not pin (``runner.runtime.nondeterminism``); the host writes it
                   in the end line.
    model_response may carry ``body_encoding: "base64"`` for a body that is not UTF-8, and
                   ``source`` (default ``provider``) for the call record.

Addition (H18): the run spec's ``mode`` may be ``manifest``: after ``start`` the runtime imports
``modules`` from ``tool_paths`` and answers with one
    manifest       {modules: [{module, file, tools: [entry]}], error?}   instead of episode
(runner/runtime/manifest.py); the host builds the registry from it without importing tool code.

Addition (program steps; additive): the model gateway of a program step
(runner/runtime/steps/gateway.py) sends each model request the program makes as
    gateway_request  {id, index, step_id, api, path, request, headers}   waits for
    gateway_response {id, status, body, body_encoding?, content_type?, model, usage, error?,
                      source?}
``api`` is ``chat_completions`` | ``responses`` | ``messages``; ``request`` is the program's
request body (a JSON object), ``headers`` the version headers passed on (``anthropic-version``,
``anthropic-beta``, ``openai-beta``). ``status`` is the HTTP status the program gets; a
response without ``body`` (refused, failed) has ``error`` and the gateway writes the API's own
error shape (additive: ``error.param``, the request field the host refused, becomes
OpenAI's ``param``; the host refuses the two beta headers). What the gateway answers itself is
reported as
    gateway_note     {kind: tracing_ingest|unsupported|invalid_request|outside_step|
                      gateway_error, method, path, bytes?, status}

Addition (MCP over Streamable HTTP; additive): in ``record``, the gateway's MCP endpoint
(runner/runtime/mcphttp.py) passes a message for a workflow's ``{mcp: {url}}`` server as
    mcp_request  {id, server: "tools[i]", session, message? | close?: true}   waits for
    mcp_response {id, response? | error?}
the host posts ``message`` to the URL its own workflow copy declares for ``server`` (never one
the sandbox names) and answers with the server's JSON-RPC ``response`` (absent for a
notification), or ``error`` (text) when it did not forward (runner/providers/mcphttp.py).
"""

import json
from typing import Any, Dict

from runner.trace.strictjson import loads as strict_loads

PROTOCOL_VERSION = 1

RUNTIME_ROOT = "/opt/sandbox-replay"
# The packages of ``runner`` a sandbox gets, read-only under ``RUNTIME_ROOT/runner`` beside
# ``runner/__init__.py``: the standard-library-only side (import-linter holds the boundary).
# Nothing else of ``runner`` (CLI, ledger, the host's episode driver, ...) is mounted.
SANDBOX_PACKAGES = ("errors", "trace", "sdk", "wire", "runtime")
TOOLS_DIR = "/sandbox/tools"

RUN_SPEC_KEYS = (
    "run_id",
    "mode",
    "workflow",
    "workflow_source",
    "task",
    "clock",
    "seed",
    "recorded_calls",
    "fork_at",
    "tool_paths",
    "modules",
    "deadline_s",
)

# Upper bound of one protocol line, bytes. The host reports a longer line as
# ``message_too_large`` (with its size) and keeps parsing what follows.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# Upper bound of an inbound line of the runtime, bytes: the ``start`` message carries the run
# spec (a reproduce run's recorded calls) and the manifest. Longer lines are discarded unread.
MAX_START_BYTES = 4 * MAX_MESSAGE_BYTES

MESSAGE_TYPES_FROM_RUNTIME = frozenset(
    {
        "hello",
        "step",
        "call",
        "model_request",
        "egress",
        "coverage",
        "meter",
        "episode",
        "error",
        "divergence",  # divergence: sent by runtime/calls.py; the host lists them in the end line
        "manifest",
        "gateway_request",  # program steps' model requests (runtime/gateway.py)
        "gateway_note",
        "nondeterminism",  # reproduce: runtime/nondeterminism.py's report, before episode
        "mcp_request",  # record: a message to an MCP server URL (runtime/mcphttp.py)
    }
)  # manifest: mode "manifest" only (runtime/manifest.py), instead of episode
MESSAGE_TYPES_FROM_HOST = frozenset(
    {"start", "model_response", "gateway_response", "mcp_response", "shutdown"}
)


def encode(message: Dict[str, Any]) -> bytes:
    r"""One protocol line for ``message`` (a dict with a ``type``), UTF-8 with ``\\n``.

    Lone surrogates (undecodable bytes carried by ``surrogateescape``) are kept reversibly as
    JSON escapes (``ensure_ascii=True``), so the writer never fails on them.

    Raises:
        ValueError: no ``type``, or a value JSON cannot represent.
    """
    if "type" not in message:
        raise ValueError("protocol message without a type")
    return (
        json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n"
    ).encode("ascii")


def decode(line: bytes) -> Dict[str, Any]:
    r"""Parse one protocol line (without or with its ``\\n``) with the strict decoder.

    `runner.trace.strictjson.loads`: UTF-8, no duplicate keys, no NaN or infinities, nesting at
    most `runner.trace.strictjson.MAX_DEPTH` (checked before parsing, so no line can exhaust the
    stack of the host or of the runtime).

    Raises:
        ValueError: not strict UTF-8 JSON (a `runner.trace.strictjson.StrictJSONError`), not an
            object, or no string ``type``.
    """
    message = strict_loads(line)
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ValueError("protocol line is not an object with a type")
    return message
