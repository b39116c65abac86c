"""The in-sandbox runtime. Standard library only, Python 3.9+: it runs inside the user's image.

Started as ``python3 -u -m runner.runtime`` (the sandbox's PID 1); its run (the run spec and the
manifest) arrives in the host's ``start`` message, so a sandbox can be started before its run is
known (a warm pool). Tool code and program steps never run in
this process: they run in its worker (``worker/``), which holds no descriptor of the channel.

Module map (imports flow downwards; nothing here imports the host side):

    __main__    entry: not dumpable and the hard cap first (pid1), isolate the channel's fds,
                then run `main.Runtime`
    pid1        the runtime as the sandbox's init: not dumpable, the lifetime cap, the reaper
    main        hello/start, load the run, egress pump, episode/error, exit codes (0 / 70)
    channel     private fds, whole-line writes, reader thread (shutdown/EOF exit at once)
    environment hello's platform and installed packages (cheap: no importlib.metadata)
    manifest    the ``manifest`` answer: the tools the sandbox describes
    mcplist     an MCP stdio server's tools/list, asked here (the server is the challenger's)
    watchdog    the run's own deadline inside the sandbox
    registry    the registry built from the capability-filtered manifest only
    template    ``${task.x}`` / ``${steps.ID.output.path}``
    steps/      engine (steps in order, episode status), agent (model loop, tool dispatch,
                simulated user), program (a user's own agent code), gateway + apicall (the
                loopback model gateway a program calls)
    replay/     calls (every call: index, clock, execute or serve, the call record), clock,
                callrecords (pure helpers), recordings (shadow observations, reproduce by
                position), rawserve (a raw I/O record answering the HTTP helper again)
    zygote/     the namespace backend's zygote: the runtime imported once, each sandbox forked
                into fresh namespaces and its read-only root before its run (serve, isolate,
                wire); ``python3 -u -m runner.runtime --zygote FD``
    worker/     the worker process tools and programs run in: client (the runtime's end),
                process (the worker's end, `before_user_code` hook), wire (what may cross)
    egress/     audit (the hook: outbound destinations and coverage, in-process and in
                children), events (what each audited event names), programs (which children
                escape the hook), childlog (the file Python children report to), site/
                (``sitecustomize.py`` that loads the hook in every Python child); the witness
                outside the worker: bpf, kernel, sockaddr, msghdr, procnet, seccomp, witness, dns,
                probe

The wall clock (`runner.sdk.wallclock`) and raw I/O capture (`runner.sdk.rawio`) are the SDK's:
record mode in a user's own process uses them too.

What the host shares with it (the message protocol, the argument rules, the runtime's errors,
the tool record, the environment names, the destination key) is `runner.wire`'s.

May import: the standard library, `runner.wire`, `runner.sdk`, `runner.trace` and
`runner.errors`. Nothing imports it (import-linter: no host package imports `runner.runtime`):
the host starts it, ``python3 -m runner.runtime``, in a sandbox.
"""

__all__ = ["main"]
