"""A second Docker engine for a test: a ``dockerd`` of its own, in a network namespace of its own.

Its own data root, exec root, pidfile and unix socket, under a fresh folder; started by
``unshare --net`` (only a ``lo``; ``--bridge=none --iptables=false`` touch nothing of the host's
network): a dockerd started with ``--bridge=none`` in the host's namespace deletes the main
engine's ``docker0`` bridge (verified: the user-image build then failed on a loaded CI
machine), so `second_dockerd` also checks that ``docker0`` is untouched. With ``hide``, it gets a
mount namespace of its own too (``--mount --propagation private``) in which tmpfs folders cover
those paths: the engine cannot see them, as a remote ``DOCKER_HOST`` or a dind service cannot.
The sandbox image is loaded with ``docker save | docker load`` (no registry here).

Stopped by its pid (SIGTERM, then SIGKILL); nothing is ever stopped by name. Needs root and
``unshare``; fails under ``CI=true`` when unusable, skips otherwise (`tests.conftest`).
Used by tests/integration/_isolated_engine.py and tests/integration/_ray.py.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import _unusable

__all__ = ["Engine", "bridge_state", "engine_answers", "second_dockerd"]


@dataclass(frozen=True)
class Engine:
    """A started second engine: its address (``unix://...``), its folder, its dockerd's pid."""

    host: str
    root: Path
    pid: int


def engine_answers(host: str) -> bool:
    """Whether the engine at ``host`` answers ``docker info`` within 20 s."""
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


def bridge_state() -> str | None:
    """``docker0`` of the host's network namespace (its interface index), None when absent."""
    try:
        return Path("/sys/class/net/docker0/ifindex").read_text().strip()
    except OSError:
        return None


def _image_id(host: str | None, image: str) -> str | None:
    cmd = ["docker", *(["-H", host] if host else []), "image", "inspect", "-f", "{{.Id}}", image]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def _argv(root: Path, host: str, hide: Sequence[str], extra_args: Sequence[str]) -> list[str]:
    dockerd = [
        "dockerd",
        f"--data-root={root}/data",
        f"--exec-root={root}/exec",
        f"--pidfile={root}/docker.pid",
        f"-H={host}",
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--log-level=warn",
        *extra_args,
    ]
    if not hide:  # unshare execs dockerd: the pid stays dockerd's, and it is stopped by it
        return ["unshare", "--net", "--", *dockerd]
    covers = " && ".join(
        f"mount -t tmpfs -o size=16m,mode=1777 sandbox-replay-hidden {shlex.quote(h)}" for h in hide
    )
    shell = f"{covers} && exec {shlex.join(dockerd)}"
    return ["unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", shell]


@contextlib.contextmanager
def second_dockerd(
    image: str,
    *,
    parent: str = "/tmp",
    prefix: str = "srd-",
    hide: Sequence[str] = (),
    extra_args: Sequence[str] = (),
) -> Iterator[Engine]:
    """Start a dockerd of its own with ``image`` loaded; stop it and remove its folder on exit.

    Args:
        image: the image to load into it (from this machine's engine).
        parent: where its folder is made (short: a unix socket path is limited to 108 bytes;
            outside ``hide``, which the engine must see).
        prefix: its folder's name prefix.
        hide: folders covered by tmpfs for that engine (they exist for it, empty).
        extra_args: more dockerd arguments (``--add-runtime=crun=/usr/bin/crun``).
    """
    if os.geteuid() != 0:
        _unusable("a second dockerd needs root")
    for tool in ("dockerd", "unshare"):
        if shutil.which(tool) is None:
            _unusable(f"{tool} is needed to start a second dockerd in a network of its own")
    hide = [h for h in hide if Path(h).is_dir()]
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    if any(str(root).startswith(h.rstrip("/") + "/") for h in hide):
        raise AssertionError(f"{root} would be hidden from the engine")
    bridge_before = bridge_state()
    host = f"unix://{root}/docker.sock"
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(
        _argv(root, host, hide, extra_args),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not engine_answers(host):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "dockerd.log").read_text(errors="replace")[-2000:]
                _unusable(f"the second dockerd did not start: {tail}")
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
            _unusable(f"cannot load {image} into the second engine: {load.stderr!r}")
        assert _image_id(host, image) == _image_id(None, image)
        assert bridge_state() == bridge_before, "the second dockerd changed the host's docker0"
        yield Engine(host, root, proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        if not hide:  # with hide, its mount namespace ended with it, and its mounts with it
            for folder in ("exec", "data"):
                subprocess.run(
                    ["umount", "-R", f"{root}/{folder}"], capture_output=True, check=False
                )
        shutil.rmtree(root, ignore_errors=True)
