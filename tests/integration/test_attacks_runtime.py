"""Hostile tool behaviour the runtime must survive, and the kernel surface (real containers).

Odd exits, unserialisable or huge results, exceptions that refuse ``str``, and what the kernel
lets an unprivileged sandbox do. Hostile tools: tests/fixtures/attacks/hostile_tools.py.
``xfail(strict=True)`` marks an open weakness (the reason names it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration._episodes import Project
from tests.integration._hostile import backend, backend_entry, project, run_steps

pytestmark = pytest.mark.docker
__all__ = ["backend", "backend_entry", "project"]  # fixtures


# --- odd tool behaviour the runtime must survive ----------------------------------------------


def test_exit_0_from_a_tool_ends_the_worker_and_the_episode_names_it(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The tool runs in the worker: its exit ends the worker, not the runtime, which records the
    call as failed with `WorkerGone` and ends the episode (before the worker: ``crashed``)."""
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: a, tool: odd.exit0}\n")
    assert out.end["status"] == "failed", out.end
    assert out.call("a")["error"]["class"] == "runner.runtime.worker.wire.WorkerGone"
    assert out.end["sandbox"]["exit_code"] == 0


def test_modules_a_tool_plants_in_the_start_folder_are_never_imported(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """The working directory (``/tmp``, writable) is not on the worker's or the runtime's
    ``sys.path``: stdlib-named modules planted there by one step are imported by no process of
    the sandbox before the next (`runner.runtime.environment.drop_start_folder`)."""
    steps = """
    - {id: p, tool: odd.plant_start_folder}
    - {id: l, tool: odd.planted_loaded}
    """
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    planted = out.body("p")
    assert planted["planted"] and planted["on_path"] == [], planted
    assert out.body("l") == []


def test_circular_nan_and_surrogate_return_values_are_recorded(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    steps = """
    - {id: s, tool: odd.surrogates}
    - {id: c, tool: odd.circular}
    """
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    assert out.call("s")["body_encoding"] == "base64"
    # recording never changes the agent (runner/trace/jsonform.py): a cycle or a NaN is kept
    # as its repr, marked, and the run goes on (they used to fail the call)
    assert out.call("c")["encoding"] == "repr" and out.call("c").get("error") is None
    assert out.end["status"] == "succeeded", out.end
    nan = run_steps(project, backend, sandbox_image, tmp_path, "- {id: n, tool: odd.nan}\n")
    assert nan.end["status"] == "succeeded" and nan.call("n")["encoding"] == "repr", nan.end


def test_tool_error_whose_str_raises_keeps_its_call_record(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: a, tool: odd.bad_str_error}\n"
    )
    assert out.end["status"] == "failed", out.end
    assert [c["tool"] for c in out.calls] == ["odd.bad_str_error"]
    assert out.end["failure"]["tool"] == "odd.bad_str_error"
    assert "raised RuntimeError" in out.calls[0]["error"]["message"]


def test_huge_tool_result_is_truncated_in_its_call_record(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    steps = "- {id: a, tool: odd.huge, args: {mb: 40}}\n- {id: b, tool: odd.surrogates}\n"
    out = run_steps(project, backend, sandbox_image, tmp_path, steps)
    call = out.call("a")
    assert call["truncated"] is True and call["original_length"] > 40 * 1024 * 1024


def test_huge_workflow_output_is_not_an_infrastructure_error(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    out = run_steps(
        project, backend, sandbox_image, tmp_path, "- {id: a, tool: odd.huge, args: {mb: 40}}\n"
    )
    assert out.end["status"] == "succeeded", out.end
    output = out.end["output"]
    assert output["truncated"] is True and output["original_length"] > 40 * 1024 * 1024
    assert output["prefix"].startswith('"hhhh')


def test_kernel_surface_is_closed(
    project: Project, backend: Any, sandbox_image: str, tmp_path: Path
) -> None:
    """No capability, no new privileges, seccomp on: no namespace, mount or chroot from inside."""
    out = run_steps(project, backend, sandbox_image, tmp_path, "- {id: k, tool: kernel.probe}\n")
    body = out.body("k")
    assert body["Seccomp"] == "2" and body["NoNewPrivs"] == "1", body
    assert int(body["CapEff"], 16) == 0 and int(body["CapBnd"], 16) == 0, body
    for key in ("unshare_user", "unshare_net", "unshare_mount", "mount", "chroot"):
        assert body[key] == "EPERM", (key, body)
    assert out.end["coverage"] == "full"  # ctypes was used: the egress witness sees its calls
