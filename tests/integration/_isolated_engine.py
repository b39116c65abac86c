"""A second Docker engine that cannot see this machine's paths (the Docker backend's copy mode).

A ``dockerd`` of its own (data root, exec root, pidfile, unix socket) started by ``unshare
--net --mount``: in a network namespace of its own (only a ``lo``; ``--bridge=none
--iptables=false`` touch nothing of the host's network, and never the main engine's ``docker0``)
and a mount namespace of its own in which tmpfs folders cover ``/work``, ``/tmp`` and
``/root``: the checkout (the runner package), the tests' temporary folders (state folders,
tool snapshots) and the home folder do not exist for that engine, as for a remote ``DOCKER_HOST``
or a dind service. Its folders live under ``/var/tmp``, which it does see. The sandbox image is
loaded into it with ``docker save | docker load`` (no registry here).

Stopped by its pid (SIGTERM, then SIGKILL); its mount namespace, with every mount it made,
ends with it. Nothing is ever stopped by name. Needs root and ``unshare``; fails under
``CI=true`` when unusable, skips otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import _unusable

HIDDEN = ("/work", "/tmp", "/root")  # folders hidden from the engine


@dataclass(frozen=True)
class IsolatedEngine:
    """The engine's address (``unix://...``), its folder and its dockerd's pid."""

    host: str
    root: Path
    pid: int


def _answers(host: str) -> bool:
    try:
        done = subprocess.run(
            ["docker", "-H", host, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@contextlib.contextmanager
def isolated_engine(image: str) -> Iterator[IsolatedEngine]:
    """Start the engine with ``image`` loaded; stop it (by pid) and remove its folder on exit."""
    if os.geteuid() != 0:
        _unusable("a second dockerd needs root")
    for tool in ("dockerd", "unshare"):
        if shutil.which(tool) is None:
            _unusable(f"{tool} is not installed")
    root = Path(tempfile.mkdtemp(prefix="srpf-", dir="/var/tmp"))  # a folder it sees
    if any(str(root).startswith(h + "/") for h in HIDDEN):
        raise AssertionError(f"{root} would be hidden from the engine")
    host = f"unix://{root}/docker.sock"
    hide = " && ".join(
        f"mount -t tmpfs -o size=16m,mode=1777 sandbox-replay-hidden {h}"
        for h in HIDDEN
        if Path(h).is_dir()
    )
    dockerd = (
        f"exec dockerd --data-root={root}/data --exec-root={root}/exec "
        f"--pidfile={root}/docker.pid -H {host} --bridge=none --iptables=false "
        "--ip6tables=false --log-level=warn"
    )
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(
        [
            "unshare",
            "--net",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"{hide} && {dockerd}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not _answers(host):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "dockerd.log").read_text(errors="replace")[-2000:]
                _unusable(f"the isolated dockerd did not start: {tail}")
            time.sleep(0.5)
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(
            ["docker", "-H", host, "load", "-q"],
            stdin=save.stdout,
            capture_output=True,
            check=False,
        )
        save.wait(timeout=300)
        if load.returncode != 0 or save.returncode != 0:
            _unusable(f"cannot load {image} into the isolated engine: {load.stderr!r}")
        yield IsolatedEngine(host, root, proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        shutil.rmtree(root, ignore_errors=True)
