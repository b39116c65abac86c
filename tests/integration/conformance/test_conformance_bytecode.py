"""Every sandboxing backend runs the runtime from the bytecode the host prepared (issue 16).

The sandbox side of runner is mounted read-only and the sandbox never writes bytecode
(``PYTHONDONTWRITEBYTECODE``): without the ``__pycache__`` that `runner.episode.prepare.
runner_mounts` prepares, every sandbox compiled every runtime module from source. Here a
sandbox of each backend imports what the runtime and its worker import, verbosely, and every
module of ``RUNTIME_ROOT`` must come from its pyc. An image whose Python has another cache tag
than the host's cannot use the host's bytecode; that premise is checked first.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid

import pytest

from runner.backends.base import Backend, SandboxSpec
from runner.episode.prepare import runner_mounts
from runner.runtime import protocol

STDOUT = 1
IMPORTS = "import runner.runtime.main, runner.runtime.worker.process, runner.runtime.egress.seccomp"


def _run(backend: Backend, image: str, *command: str) -> tuple[int, bytes, bytes]:
    spec = SandboxSpec(
        run_id=f"pyc-{uuid.uuid4().hex[:10]}",
        image=image,
        command=command,
        mounts=tuple(runner_mounts()),
        env={"PYTHONPATH": protocol.RUNTIME_ROOT, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    out, err = bytearray(), bytearray()
    with backend.sandbox(spec) as box:
        deadline = time.monotonic() + 60
        for frame in box.frames(0.2):
            if frame is not None:
                (out if frame[0] == STDOUT else err).extend(frame[1])
            assert time.monotonic() < deadline, "the sandbox did not end"
        state = box.wait(30)
    return state.exit_code, bytes(out), bytes(err)


def test_the_runtime_and_worker_modules_load_from_the_mounted_bytecode(
    backend: Backend, image: str
) -> None:
    code, out, err = _run(
        backend,
        image,
        "python3",
        "-c",
        "import json, sys; print(json.dumps(sys.implementation.cache_tag))",
    )
    assert code == 0, err
    if json.loads(out) != sys.implementation.cache_tag:
        pytest.skip(f"the image's Python ({out!r}) cannot use this host's bytecode")
    code, _, err = _run(backend, image, "python3", "-v", "-c", IMPORTS)
    assert code == 0, err[-4000:]
    loaded = re.findall(rb"^# code object from '?([^'\n]+)'?$", err, re.M)
    ours = [path.decode() for path in loaded if path.startswith(protocol.RUNTIME_ROOT.encode())]
    assert len(ours) > 40, err[-4000:]  # the runtime's and the worker's modules
    # runner/__init__.py is mounted as a lone file (two lines): no __pycache__ beside it
    lone = f"{protocol.RUNTIME_ROOT}/runner/__init__.py"
    from_source = [path for path in ours if not path.endswith(".pyc") and path != lone]
    assert from_source == []
