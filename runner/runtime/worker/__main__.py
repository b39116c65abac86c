"""Entry point of the worker: ``python3 -u -m runner.runtime.worker READ_FD WRITE_FD``."""

import contextlib
import os
import sys

from runner.runtime.worker.process import main

if __name__ == "__main__":
    code = main(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
