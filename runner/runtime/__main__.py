"""Entry point of the in-sandbox runtime: ``python3 -u -m runner.runtime``.

The very first thing it does is move the channel out of tool code's reach
(`runner.runtime.channel.isolate_stdio`); then `runner.runtime.main.Runtime` speaks the
protocol. The process ends with ``os._exit`` so that threads left behind by tool code cannot
keep it alive after the ``episode`` message.
"""

import contextlib
import os
import sys

from runner.runtime.channel import Channel, isolate_stdio


def main() -> int:
    """Run the runtime; return its exit code (0, or 70 when the runtime itself failed)."""
    read_fd, write_fd = isolate_stdio()
    from runner.runtime.main import Runtime

    return Runtime(Channel(read_fd, write_fd)).serve()


if __name__ == "__main__":
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
