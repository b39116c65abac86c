"""Without Docker: the lifetime cap rule, the container command and flags that
enforce it, the runtime's watchdog, and the classification of a sandbox that ended itself.

The real containers (kill -9 of ``submit``, a stdin-ignoring sandbox, a frozen runtime) are in
tests/integration/test_containment.py.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from docker.types import ContainerConfig

from runner.backends.base import CAP_GRACE_S, ExitState, LifetimeCap, ResourceLimits, SandboxSpec
from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.hardening import capped_command
from runner.backends.docker.sandbox import ran_seconds
from runner.episode.status import classify
from runner.errors import InputError
from runner.runtime import watchdog
from runner.runtime.main import check_run_spec


def _spec(**kw: Any) -> SandboxSpec:
    return SandboxSpec(run_id="r1", image="img", command=("python3", "-c", "pass"), **kw)


def test_the_cap_is_pool_lifetime_plus_run_timeout_plus_rate_limit_wait_plus_grace() -> None:
    cap = LifetimeCap(300.0, pool_lifetime_s=60.0, rate_limit_wait_s=30.5)
    assert cap.total_s == 60.0 + 300.0 + 30.5 + CAP_GRACE_S
    assert cap.whole_s == 401  # rounded up: the cap is never shorter than the rule
    # no explicit cap: derived from the spec's own timeout, never absent
    assert _spec(limits=ResourceLimits(timeout_s=20)).hard_cap == LifetimeCap(20)
    assert _spec(limits=ResourceLimits(timeout_s=20)).hard_cap.whole_s == 30
    for bad in (float("inf"), float("nan"), -1.0):
        with pytest.raises(ValueError, match="finite"):
            LifetimeCap(bad)


def test_prepare_run_fixes_the_cap_and_the_watchdog_deadline(tmp_path: Path) -> None:
    from runner.domain.ids import sequential_ids
    from runner.domain.tasks import Task
    from runner.episode.prepare import prepare_run
    from runner.episode.request import EpisodeRequest
    from runner.settings import Settings

    registry = SimpleNamespace(manifest=lambda policy: {"tools": []}, tool_roots=lambda: [])
    workflow = SimpleNamespace(
        normalised=lambda: {"steps": []}, source="", spec=SimpleNamespace(model=None)
    )
    request = EpisodeRequest(
        workflow=workflow, task=Task(task_id="t", input={}), policy=None, registry=registry,
        image="img",
    )  # fmt: skip
    settings = Settings(state_dir=tmp_path, timeout_s=42)
    prepared = prepare_run(request, settings, sequential_ids(), rate_limit_wait_s=8.0)
    assert prepared.spec.hard_cap == LifetimeCap(42, rate_limit_wait_s=8.0)
    # the runtime's watchdog lets the run wait on rate limits as long as the host does
    assert prepared.run_spec["deadline_s"] == 42 + 8.0
    # by default the term is the policy's longest allowed wait (rate_limits.max_wait_s)
    from runner.policy import load_policy

    policy = load_policy("shadow")
    with_model = SimpleNamespace(
        normalised=lambda: {"steps": []}, source="", spec=SimpleNamespace(model={"provider": "x"})
    )
    again = prepare_run(
        replace(request, policy=policy, workflow=with_model), settings, sequential_ids(start=2)
    )
    wait = policy.rate_limits.max_wait_s
    assert wait > 0 and again.spec.hard_cap == LifetimeCap(42, rate_limit_wait_s=wait)
    assert again.run_spec["deadline_s"] == 42 + wait
    # a workflow without a model makes no model call: it waits on no rate limit
    plain = prepare_run(replace(request, policy=policy), settings, sequential_ids(start=3))
    assert plain.spec.hard_cap == LifetimeCap(42, rate_limit_wait_s=0.0)
    assert plain.run_spec["deadline_s"] == 42


def test_the_container_runs_under_timeout_as_pid_1_with_stdin_once() -> None:
    spec = _spec(cap=LifetimeCap(5.0, grace_s=1.5))
    command = capped_command(spec)
    assert command[:2] == ["/bin/sh", "-c"] and command[3:] == ["7", "python3", "-c", "pass"]
    assert '"$c" -s KILL "$0" "$@"' in command[2] and "exec env -u PWD" in command[2]
    api = SimpleNamespace(api_version="1.41")
    kwargs = DockerBackend(api, address="unix:///x", session_id="s").create_kwargs(spec)
    assert kwargs["command"] == command and kwargs["host_config"]["Init"] is False
    config_kwargs = {
        k: kwargs[k]
        for k in ("image", "command", "user", "detach", "stdin_open", "tty", "environment")
    }
    config = ContainerConfig("1.41", **config_kwargs)  # docker-py's own translation
    assert config["StdinOnce"] is True and config["OpenStdin"] is True
    assert config["AttachStdin"] is True


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout on the host")
def test_the_cap_script_kills_at_the_cap_and_says_when_there_is_no_timeout() -> None:
    script = capped_command(_spec(cap=LifetimeCap(0.0, grace_s=1.0)))[2]
    started = time.monotonic()
    done = subprocess.run(["/bin/sh", "-c", script, "1", "sleep", "30"], check=False)
    # outside a container timeout also SIGKILLs itself (its process group); as PID 1 it
    # survives and exits 137
    assert done.returncode in (137, -9) and time.monotonic() - started < 10
    missing = subprocess.run(
        ["/bin/sh", "-c", script, "1", "true"],
        env={"PATH": "/nonexistent"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 125 and "no coreutils timeout" in missing.stderr


def test_engine_times_give_the_run_time() -> None:
    state = {
        "StartedAt": "2026-12-01T08:49:24.466551395Z",
        "FinishedAt": "2026-12-01T08:49:27.468891745Z",
    }
    assert ran_seconds(state) == pytest.approx(3.00234, abs=1e-5)
    assert (
        ran_seconds({"StartedAt": state["StartedAt"], "FinishedAt": "0001-01-01T00:00:00Z"}) is None
    )
    assert ran_seconds({}) is None


def test_watchdog_exits_124_a_grace_after_the_deadline() -> None:
    fired = threading.Event()
    codes: list[int] = []

    def exit_(code: int) -> None:
        codes.append(code)
        fired.set()

    started = time.monotonic()
    watchdog.arm(0.2, started, grace_s=0.1, exit=exit_)
    assert fired.wait(5) and codes == [watchdog.EXIT_DEADLINE] == [124]
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize("value", [0, -1, "5", True, float("inf")])
def test_the_run_specs_deadline_is_validated(value: Any) -> None:
    spec = {"mode": "shadow", "workflow": {}, "task": {}, "deadline_s": value}
    with pytest.raises(InputError) as info:
        check_run_spec(spec)
    assert info.value.fields["field"] == "run.deadline_s"


def _state(**kw: Any) -> Any:
    limits = ResourceLimits(timeout_s=3.0)
    values: dict[str, Any] = {
        "infra_error": None,
        "ceiling_refusals": [],
        "undeclared_tools": {},
        "provider_timed_out": False,
        "budget_cut": False,
        "killed_for": None,
        "episode": None,
        "runtime_error": None,
        "protocol_error": None,
        "hello": {"type": "hello"},
        "limit": None,
        "invalid_message": None,
        "sandbox_s": 0.0,
        "prepared": SimpleNamespace(spec=_spec(limits=limits)),
    }
    values.update(kw)
    return SimpleNamespace(**values)


@pytest.mark.parametrize(
    ("exit_code", "ran_s", "status", "why"),
    [
        (124, 6.1, "timeout", "watchdog"),  # the runtime's watchdog, past the deadline
        (137, 13.0, "timeout", "lifetime cap (13 s)"),  # the cap, past the deadline
        (124, 0.5, "crashed", "exited with code 124"),  # a tool that exits 124 early
        (137, 1.0, "crashed", "exited with code 137"),  # SIGKILL from inside, early
        (1, 9.0, "crashed", "exited with code 1"),  # late, but not how the cap ends
    ],
)
def test_a_sandbox_that_ended_itself_past_its_deadline_is_a_timeout(
    exit_code: int, ran_s: float, status: str, why: str
) -> None:
    got, reason = classify(_state(), ExitState(exit_code=exit_code, ran_s=ran_s))
    assert got == status and reason is not None and why in reason, reason


def test_without_engine_times_the_hosts_sandbox_seconds_count() -> None:
    assert classify(_state(sandbox_s=7.0), ExitState(exit_code=124))[0] == "timeout"
    assert classify(_state(sandbox_s=1.0), ExitState(exit_code=124))[0] == "crashed"
    # an episode message was sent: its status stands, whatever the exit
    episode = {"status": "failed"}
    assert classify(_state(episode=episode), ExitState(exit_code=124, ran_s=9))[0] == "failed"
