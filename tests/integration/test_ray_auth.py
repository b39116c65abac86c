"""Attacks on the Ray cluster of the README, run for real on 127.0.0.1.

- A node that joins without the token (or with a wrong one) is refused by a token cluster and
  never gets a task; the same node joins an open cluster (the review's attack, the control).
- ``doctor --backend ray`` flags an open cluster (required check ``auth``, exit 6) and does not
  join it; ``submit --backend ray`` refuses it (exit 6) unless ``--unsafe-open-cluster``.
- While ``submit --backend ray`` runs with ``OPENAI_API_KEY`` in the environment it was started
  with, code on the cluster that reads every process's ``/proc/PID/environ`` finds the key
  nowhere (the review read it from the driver's).

Fails (never skips) under CI=true without Ray, root or Docker.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._ray import (
    AUTH_ENV,
    LOOPBACK_ENV,
    RayCluster,
    ray_cluster,
    ray_module,
)
from tests.integration.test_ray_backend import _project
from tests.support.cli import CLI

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

SECRET = "sk-proj-N01-" + "4f" * 20

# A node that tries to join the cluster at argv[1] with one unit of the resource "rogue_slot".
ROGUE_NODE = """
import sys, time
import ray
from ray._private.node import Node
from ray._private.parameter import RayParams
params = RayParams(gcs_address=sys.argv[1], node_ip_address="127.0.0.1", num_cpus=1,
                   resources={"rogue_slot": 1}, object_store_memory=80 * 1024 * 1024)
try:
    node = Node(params, head=False, shutdown_at_exit=True, spawn_reaper=False)
except BaseException as exc:
    print("REFUSED", type(exc).__name__, str(exc)[:400], flush=True)
    sys.exit(3)
print("JOINED", node.node_id, flush=True)
sys.stdin.readline()
node.kill_all_processes(check_alive=False, allow_graceful=False)
"""


@pytest.fixture(scope="module")
def cluster(sandbox_image: str) -> Iterator[RayCluster]:
    ray = ray_module()
    with ray_cluster(None) as running:
        ray.init(address=running.address, include_dashboard=False, log_to_driver=False)
        try:
            yield running
        finally:
            ray.shutdown()


def _bare_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without Ray's token variables, with its own HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return {**env, **LOOPBACK_ENV, "HOME": str(home), **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rogue_slots() -> float:
    import ray

    return float(ray.cluster_resources().get("rogue_slot", 0))  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("token", [None, "not-the-token"], ids=["no-token", "wrong-token"])
@pytest.mark.slow
def test_a_node_without_the_token_is_refused_and_runs_nothing(
    cluster: RayCluster, tmp_path: Path, token: str | None
) -> None:
    extra = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token} if token else {}
    rogue = subprocess.run(
        [sys.executable, "-c", ROGUE_NODE, cluster.address],
        env=_bare_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert rogue.returncode == 3, (rogue.stdout, rogue.stderr[-2000:])
    assert "REFUSED" in rogue.stdout
    assert "Unauthenticated" in rogue.stderr or "InvalidAuthToken" in rogue.stderr
    assert _rogue_slots() == 0  # the cluster never counted it


@pytest.fixture(scope="module")
def open_head() -> Iterator[str]:
    """A head without authentication (``RAY_AUTH_MODE=disabled``) with one sandbox slot, as the
    review's cluster was; ``ray start --block`` ends its processes when it is stopped."""
    ray_module()
    port = _free_port()
    temp = Path(tempfile.mkdtemp(prefix="srray-open-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update({**LOOPBACK_ENV, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"})
    ray_cli = str(Path(sys.executable).parent / "ray")
    proc = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
         "--num-cpus=0", '--resources={"sandbox_slots": 1}', "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir={temp}", "--object-store-memory=80000000"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _answers(address):
            assert proc.poll() is None, "the open head did not start"
            assert time.monotonic() < deadline, "the open head did not answer"
            time.sleep(0.5)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        subprocess.run(["rm", "-rf", str(temp)], check=False)


def _answers(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        **LOOPBACK_ENV,
        **AUTH_ENV,
        "SANDBOX_REPLAY_STATE_DIR": str(cwd / "state"),
    }
    full.update(env)
    return subprocess.run(
        [CLI, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_rogue_node_joins_an_open_cluster(open_head: str, tmp_path: Path) -> None:
    """The control: the same node, against a cluster without authentication, joins."""
    rogue = subprocess.Popen(
        [sys.executable, "-c", ROGUE_NODE, open_head],
        env=_bare_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert rogue.stdin is not None and rogue.stdout is not None
    try:
        assert rogue.stdout.readline().startswith("JOINED")
    finally:
        rogue.stdin.write("\n")
        rogue.stdin.close()
        rogue.wait(timeout=120)


def test_doctor_flags_an_open_cluster_and_does_not_join_it(open_head: str, tmp_path: Path) -> None:
    done = _cli(["doctor", "--backend", "ray", "--ray-address", open_head], tmp_path)
    assert done.returncode == 6, done.stdout + done.stderr
    assert done.stdout.startswith("FAIL  auth"), done.stdout
    assert "gcs at " + open_head + ": open" in done.stdout
    nodes = [line for line in done.stdout.splitlines() if line.startswith("node ")]
    assert nodes == []  # no node was checked: the cluster was not joined
    # a driver in token mode refuses the open cluster's own workers: this one is not
    warned = _cli(
        ["doctor", "--backend", "ray", "--ray-address", open_head, "--unsafe-open-cluster"],
        tmp_path,
        RAY_AUTH_MODE="disabled",
    )
    assert warned.stdout.startswith("warn  auth"), warned.stdout + warned.stderr
    assert "raylet " in warned.stdout  # joined: the raylet was asked too


def test_submit_refuses_an_open_cluster(open_head: str, tmp_path: Path) -> None:
    work = _project(tmp_path / "p", tasks=1, sleep_s=0.1)
    args = ["submit", "--variant", "v1.yaml", "--tasks", "tasks.jsonl", "--backend", "ray",
            "--ray-address", open_head, "--json"]  # fmt: skip
    done = _cli(args, work)
    assert done.returncode == 6, done.stdout + done.stderr
    assert "does not authenticate its clients" in done.stdout
    assert "--unsafe-open-cluster" in done.stdout
    assert not list((work / "state").glob("traces/*.jsonl"))


def test_doctor_passes_auth_on_the_token_cluster(cluster: RayCluster, tmp_path: Path) -> None:
    done = _cli(["doctor", "--backend", "ray", "--ray-address", cluster.address], tmp_path)
    first = done.stdout.splitlines()[0] if done.stdout else ""
    assert first.startswith("ok    auth"), done.stdout + done.stderr
    assert "(token)" in first and "raylet" in first
    # a driver that would send no token is told what to set (Ray's client retries ~20 s)
    bare = _cli(["doctor", "--backend", "ray", "--ray-address", cluster.address], tmp_path,
                RAY_AUTH_MODE="disabled")  # fmt: skip
    assert bare.returncode == 6 and "set RAY_AUTH_MODE=token" in bare.stderr, bare.stderr


def _environ_holders(secret: str) -> list[tuple[int, str]]:
    """A cluster task: every process of this machine whose environment block holds ``secret``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                block = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")[:120].decode(errors="replace")
        except OSError:
            continue
        if secret.encode() in block:
            found.append((int(entry), cmd))
    return found


@pytest.mark.slow
def test_cluster_code_finds_the_drivers_model_key_in_no_process_environment(
    cluster: RayCluster, tmp_path: Path
) -> None:
    import ray
    import ray._private.state as ray_state

    scan = ray.remote(_environ_holders)
    work = _project(tmp_path / "p", tasks=2, sleep_s=6.0)
    env = {**os.environ, **LOOPBACK_ENV, **AUTH_ENV, "OPENAI_API_KEY": SECRET,
           "SANDBOX_REPLAY_STATE_DIR": str(work / "state")}  # fmt: skip
    log = (tmp_path / "driver.log").open("w")
    driver = subprocess.Popen(
        [CLI, "submit", "--variant", "v1.yaml", "--tasks", "tasks.jsonl", "--backend", "ray",
         "--ray-address", cluster.address, "--concurrency", "2", "--json"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    found: list[Any] = []
    scans_while_joined = 0
    try:
        while driver.poll() is None:
            joined = any(j["DriverPid"] == driver.pid and not j["IsDead"] for j in ray_state.jobs())
            hits = ray.get(scan.options(num_cpus=0).remote(SECRET), timeout=120)
            # the driver seals itself before it joins (runner/backends/ray/driverenv.py): until
            # then its own environment is the one it was started with, key included (a scan
            # there, on a loaded machine, found it); nothing else may ever hold the key
            found.extend(hit for hit in hits if joined or hit[0] != driver.pid)
            scans_while_joined += joined and driver.poll() is None
            time.sleep(0.5)
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
        log.close()
    assert driver.returncode == 0, (tmp_path / "driver.log").read_text()[-3000:]
    assert scans_while_joined >= 2, "the driver was never seen joined while scanning"
    assert found == [], found
