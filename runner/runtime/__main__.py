"""Entry point of the in-sandbox runtime: ``python3 -u -m runner.runtime``.

The very first things it does: take its start folder (``/tmp``, writable by tool code) out of
``sys.path`` (`runner.runtime.environment.drop_start_folder`), become not dumpable and arm the
sandbox's hard lifetime cap (`runner.runtime.pid1`: the runtime is the container's PID 1; a
pooled sandbox's idle cap until its run is assigned), then move the channel to private
descriptors (`runner.runtime.channel.isolate_stdio`); then `runner.runtime.main.Runtime` speaks
the protocol. The process ends with ``os._exit`` so that threads left behind by tool code cannot
keep it alive after the ``episode`` message.

``python3 -u -m runner.runtime --zygote FD`` is the namespace backend's zygote instead
(`runner.runtime.zygote`): this same module, its runtime imported once, ``main`` run in each
sandbox it forks.
"""

import gc

# no collection while the runtime's ~70 modules are imported: they allocate only what they keep
# (~13 % of the imports' CPU in a fresh interpreter); on again before any run (`main`)
gc.disable()

import contextlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from runner.runtime.environment import drop_start_folder  # noqa: E402

drop_start_folder()  # before any other import: a module left in /tmp never shadows ours

from runner.runtime import pid1  # noqa: E402
from runner.runtime.channel import Channel, isolate_stdio  # noqa: E402


def main() -> int:
    """Run the runtime; return its exit code (0, or 70 when the runtime itself failed)."""
    pid1.drop_signal_handlers()
    dumpable = pid1.make_undumpable()
    try:
        cap_s = pid1.cap_of(os.environ)
        idle_s = pid1.cap_of(os.environ, pid1.ENV_IDLE_CAP)
    except ValueError as exc:
        sys.stderr.write("sandbox-replay runtime: {}\n".format(exc))
        return 70
    # pooled: the idle cap until ``start``, then the run's cap from there (Runtime.serve)
    first = idle_s if idle_s is not None else cap_s
    cap = pid1.arm_cap(first) if first is not None else None
    read_fd, write_fd = isolate_stdio()
    from runner.runtime.main import Runtime  # after the channel is private: nothing sees it

    gc.enable()

    return Runtime(
        Channel(read_fd, write_fd), dumpable_problem=dumpable, cap=cap, cap_s=cap_s
    ).serve()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:  # runner.wire.zygote.ZYGOTE_FLAG
        from runner.runtime.zygote.serve import serve

        control = int(sys.argv[2])  # its control socket (runner.backends.namespace.zygote)
        sys.argv = sys.argv[:1]  # what a sandbox forked from it sees, as a fresh runtime
        code = serve(control, main)
    else:
        code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
