"""An init command (the runtime, `SandboxSpec.init`) is PID 1, its cap in the environment."""

from __future__ import annotations

from runner.backends.base import LifetimeCap, SandboxSpec
from runner.backends.docker.hardening import CAP_ENV, capped_command, sandbox_environment
from runner.runtime import pid1


def _spec(init: bool) -> SandboxSpec:
    return SandboxSpec(
        run_id="r1",
        image="img",
        command=("python3", "-u", "-m", "runner.runtime"),
        cap=LifetimeCap(10.0, grace_s=2.0),
        init=init,
    )


def test_an_init_command_is_pid_1_itself_and_reads_its_cap() -> None:
    spec = _spec(init=True)
    assert capped_command(spec) == ["python3", "-u", "-m", "runner.runtime"]
    assert CAP_ENV == pid1.ENV_HARD_CAP
    assert pid1.cap_of(sandbox_environment(spec)) == spec.hard_cap.whole_s == 12


def test_any_other_command_stays_under_the_timeout_cap() -> None:
    spec = _spec(init=False)
    assert capped_command(spec)[:2] == ["/bin/sh", "-c"]
    assert CAP_ENV not in sandbox_environment(spec)
