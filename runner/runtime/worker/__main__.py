"""Entry point of the worker: ``python3 -u -m runner.runtime.worker READ_FD WRITE_FD``.

Its start folder (the sandbox's ``/tmp``) is taken out of ``sys.path`` before anything else is
imported (`runner.runtime.environment.drop_start_folder`): a module tool code leaves there never
shadows a later import of the worker's own code.
"""

import contextlib
import os
import sys

from runner.runtime.environment import drop_start_folder

drop_start_folder()  # before any other import

from runner.runtime.worker.process import main  # noqa: E402

if __name__ == "__main__":
    code = main(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
