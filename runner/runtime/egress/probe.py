"""``python3 -m runner.runtime.egress.probe [COMMAND...]``: run a command under the witness.

Standard library only, Python 3.9+; run inside a sandbox. Starts ``COMMAND`` (default: a
self-test that connects to ``203.0.113.1:9``, TEST-NET-3, never routed) as a child that installs
the filter on itself (`seccomp.install`) and then ``exec``s it, serves it with a `Witness`, and
prints one JSON line per logged attempt, then a summary line ``{"usable", "reason", "exit",
"install_ms", "answered"}``. ``doctor`` runs the self-test to say whether the witness works.
``--gateway PORT`` lets connects to that loopback port through; ``--not-dumpable`` first makes
this process not dumpable, as the PID-1 runtime is (the worker, an ``exec``ed child, is).
"""

import ctypes
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from runner.runtime.egress import seccomp
from runner.runtime.egress.witness import serve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_CHILD = (
    "import os,sys,time\n"
    "t=time.process_time()\n"
    "from runner.runtime.egress import seccomp\n"
    "r=seccomp.install(int(sys.argv[1]))\n"
    "os.write(int(sys.argv[1]),('T %d %d\\n'%(r.witnessed,(time.process_time()-t)*1e6)).encode())\n"
    "os.close(int(sys.argv[1]))\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)
PR_SET_DUMPABLE = 4
COMMAND_TIMEOUT_S = 600  # the sandbox's own lifetime cap ends it sooner
MAX_ATTEMPTS = 10000  # attempts printed; a flood beyond is not
SELF_TEST = [
    sys.executable,
    "-c",
    "import socket,errno\n"
    "s=socket.socket()\n"
    "print(s.connect_ex(('203.0.113.1',9))==errno.ENETUNREACH)",
]


def run(command: List[str], gateway: Optional[int] = None) -> Dict[str, Any]:
    """Run ``command`` under the witness; the logged attempts and the summary.

    Returns:
        ``{"attempts": [...], "usable": bool, "reason": str, "exit": int, "install_us": int,
        "answered": int, "stdout": str}``.
    """
    ours, theirs = socket.socketpair()
    env = dict(os.environ, PYTHONPATH=ROOT)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(theirs.fileno()), *command],
        pass_fds=(theirs.fileno(),),
        env=env,
        stdout=subprocess.PIPE,
    )
    theirs.close()
    attempts: List[Dict[str, Any]] = []

    def sink(attempt: Dict[str, Any]) -> None:
        if len(attempts) < MAX_ATTEMPTS:
            attempts.append(attempt)

    witness, coverage = serve(child.pid, ours.fileno(), gateway, sink)
    reason = "" if coverage is None else str(coverage["reason"])
    install_us = -1
    try:
        line = seccomp.read_line(ours.fileno(), time.monotonic() + 10)
        install_us = int(line.split()[2])
    except (OSError, IndexError, ValueError):
        pass
    out, _ = child.communicate(timeout=COMMAND_TIMEOUT_S)
    ours.close()
    if witness is not None:
        witness.join(5)
        witness.stop()
    return {
        "attempts": attempts,
        "usable": witness is not None,
        "reason": reason,
        "exit": child.returncode,
        "install_us": install_us,
        "answered": witness.answered if witness else 0,
        "errors": witness.errors if witness else [],
        "stdout": out.decode("utf-8", "replace")[-2000:],
    }


def main(argv: List[str]) -> int:
    """Entry point: print the attempts and the summary as JSON lines; exit 0, or 1 unusable."""
    gateway = None
    if argv[:1] == ["--not-dumpable"]:  # as the PID-1 runtime makes itself (prctl)
        argv = argv[1:]
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if argv[:1] == ["--gateway"]:
        gateway, argv = int(argv[1]), argv[2:]
    result = run(argv or SELF_TEST, gateway)
    if not argv:
        result["usable"] = result["usable"] and result["stdout"].strip() == "True"
    for attempt in result.pop("attempts"):
        print(json.dumps({"attempt": attempt}))
    print(json.dumps(result))
    return 0 if result["usable"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
