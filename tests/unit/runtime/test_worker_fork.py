"""The worker as a fork of the runtime (runner/runtime/worker/fork.py).

Outside a container: what the child keeps (descriptors, session, dumpable flag, environment),
and that the runtime runs the same episode whether its worker is forked or a fresh interpreter
(``SANDBOX_REPLAY_WORKER_START=exec``, the path of non-Linux hosts). The attacks on the fork
run in real sandboxes: tests/integration/test_attacks_worker.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.runtime.worker import fork
from tests.support.paths import REPO, TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import manifest_for, run_runtime, write_run_dir

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: fork path")


def test_exec_is_wanted_only_when_asked_on_linux() -> None:
    assert fork.exec_wanted({}) is False
    assert fork.exec_wanted({fork.ENV_WORKER_START: "exec"}) is True
    assert fork.exec_wanted({fork.ENV_WORKER_START: "fork"}) is False


# In a child process: a forked worker whose `process.main` is replaced by a probe that reports
# what it holds on its write end, then exits.
CHILD = r"""
import json, os, sys
from runner.runtime.worker import fork, process

def probe(argv):
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink("/proc/self/fd/" + name).endswith("/fd"):  # not the listing's
                fds.append(int(name))
        except OSError:
            pass
    fds.sort()
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    import ctypes
    dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
    out = {"argv": argv, "fds": fds, "sid": os.getsid(0) == os.getpid(), "dumpable": dumpable,
           "env": os.environ.get("ONLY"), "other": os.environ.get("DROPPED")}
    os.write(int(argv[1]), json.dumps(out).encode())
    return 0

process.main = probe
from runner.runtime import pid1
pid1.make_undumpable()
spare = os.open(os.devnull, os.O_RDONLY)  # inheritable or not: the child must not keep it
os.set_inheritable(spare, True)
r, w = os.pipe()
os.environ["DROPPED"] = "1"
pid = fork.start(0, w, None, {"ONLY": "yes"})
os.close(w)
data = os.read(r, 65536)
_, status = os.waitpid(pid, 0)
print(json.dumps({"child": json.loads(data), "exit": os.waitstatus_to_exitcode(status),
                  "w": w, "spare": spare}))
"""


def test_the_child_keeps_only_its_descriptors_its_session_and_is_dumpable() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    child = found["child"]
    assert found["exit"] == 0
    assert child["fds"] == sorted({0, 1, 2, found["w"]}), child  # the spare is gone
    assert found["spare"] not in child["fds"]
    assert child["sid"] is True and child["dumpable"] == 1, child
    assert child["env"] == "yes" and child["other"] is None, child
    assert child["argv"][1] == str(found["w"]), child


WORKFLOW = {
    "name": "w",
    "version": "1",
    "model": None,
    "steps": [{"id": "x", "tool": "math.add", "args": {"a": 1, "b": 2}}],
}


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_the_episode_is_the_same_forked_or_exec(
    start: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(fork.ENV_WORKER_START, start)
    run_dir = write_run_dir(
        tmp_path / "run",
        WORKFLOW,
        {"task_id": "t", "input": {}},
        manifest_for({"math.add": "execute"}),
    )
    result = run_runtime(run_dir, tmp_path)
    episode = [m for m in result.messages if m["type"] == "episode"]
    assert result.returncode == 0, result.stderr
    assert episode and episode[0]["status"] == "succeeded", result.messages
    assert episode[0]["output"] == 3
