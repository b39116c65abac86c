"""The in-sandbox runtime. Standard library only, Python 3.9+: it runs inside the user's image.

Started as ``python3 -u -m runner.runtime`` with the run folder (``run.json``, ``manifest.json``)
mounted read-only at ``/sandbox/run`` (``SANDBOX_REPLAY_RUN_DIR`` overrides it for tests).

Module map (imports flow downwards; nothing here imports the host side):

    __main__    entry: isolate the channel's fds first, then run `main.Runtime`
    main        hello/start, load the run, egress pump, episode/error, exit codes (0 / 70)
    environment hello's platform and installed packages (cheap: no importlib.metadata)
    channel     private fds, whole-line writes, reader thread (shutdown/EOF exit at once)
    engine      steps in order, step progress, episode status (succeeded|failed|denied)
    agent       agent steps: model loop through the host, tool dispatch, simulated user
    calls       every call: index, injected clock, execute or serve, the trace call record
    wallclock   the run's clock as every wall-clock read's (time.time, datetime.now, ...)
    callrecords pure helpers of call records (JSON bodies, tool ids, model bodies, comparison)
    rawio       tools doing HTTP through the SDK helper: raw bodies recorded and re-served
    recordings  observation matching (shadow) and serving by position (reproduce)
    registry    the registry built from the capability-filtered manifest only
    template    ``${task.x}`` / ``${steps.ID.output.path}``
    audit       audit hook: outbound destinations and coverage, in-process and in children
    programs    which child processes escape the hook (coverage rules)
    childlog    the file Python children report to, forwarded by the runtime
    errors      RecordedError, UnrecordedCall, PureResultMismatch, ModelCallError, ...
    protocol    the NDJSON message contract shared with the host
    site/       ``sitecustomize.py`` that loads the hook in every Python child

May import: the standard library, `runner.sdk`, `runner.trace` and `runner.errors`. The host
imports only `protocol` (the message contract, the run folder and the mounted packages); the
runtime is started, never imported, by the host.
"""

__all__ = ["protocol"]
