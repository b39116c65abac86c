"""Helpers for integration tests that run real episodes in real containers.

`Project` writes a tool module, a workflow and runs it through `run_episode` with the real
Docker backend. The load-time eligibility check is NOT applied here: the tests that need the
defence in depth call this path on purpose ("bypass the load check through a test-only path").
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runner.domain.ids import sequential_ids
from runner.domain.tasks import Task
from runner.domain.workflow import load_workflow
from runner.episode.driver import run_episode
from runner.episode.prepare import RUNTIME_COMMAND
from runner.episode.request import EpisodeResult
from runner.policy import load_policy
from runner.providers.factory import provider_for
from runner.settings import Settings
from runner.tools.snapshot.sources import project_snapshot
from runner.tools.source import registry_for_workflow


@dataclass
class Outcome:
    result: EpisodeResult
    lines: list[dict[str, Any]]

    @property
    def end(self) -> dict[str, Any]:
        return self.lines[-1]

    @property
    def calls(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["type"] == "call"]

    def call(self, step_id: str) -> dict[str, Any]:
        found = [c for c in self.calls if c.get("step_id") == step_id]
        assert found, f"no call for step {step_id!r}: {[c.get('step_id') for c in self.calls]}"
        return found[0]

    def body(self, step_id: str) -> Any:
        call = self.call(step_id)
        assert "error" not in call, call
        return json.loads(call["body"])


class Project:
    """A folder with a tool module and workflows, readable by the sandbox user (uid 10001)."""

    def __init__(self, root: Path, tools_source: str, module: str = "attack_tools") -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.module = module
        path = self.root / f"{module}.py"
        path.write_text(textwrap.dedent(tools_source))
        path.chmod(0o644)
        self.counter = 0

    def workflow(self, steps: str, *, name: str = "attack", model: str | None = None) -> Path:
        self.counter += 1
        path = self.root / f"wf{self.counter}.yaml"
        text = f'name: {name}\nversion: "1"\ntools: [{self.module}]\n'
        if model:
            text += f'model: {{provider: scripted, function: "{model}"}}\n'
        text += "steps:\n" + textwrap.indent(textwrap.dedent(steps), "  ")
        path.write_text(text)
        path.chmod(0o644)
        return path

    def run(
        self,
        backend: Any,
        image: str,
        workflow: Path,
        *,
        state_dir: Path,
        task_input: dict[str, Any] | None = None,
        observations: tuple[dict[str, Any], ...] = (),
        command: tuple[str, ...] = RUNTIME_COMMAND,
        policy: str = "shadow",
        hello_timeout_s: float = 30.0,
        monotonic: Any = None,
        **limits: Any,
    ) -> Outcome:
        wf = load_workflow(workflow)
        pol = load_policy(policy)
        registry = registry_for_workflow(wf).restrict(pol)  # no eligibility check: on purpose
        from runner.episode.request import EpisodeRequest

        request = EpisodeRequest(
            workflow=wf,
            task=Task(
                task_id="t1",
                input=task_input or {},
                clock_start=1761574800.0,
                observations=observations,
            ),
            policy=pol,
            registry=registry,
            image=image,
            mode=pol.mode,
        )
        model = wf.spec.model
        provider = provider_for(model.model_dump() if model else None, search_paths=[wf.folder])
        settings = Settings(state_dir=state_dir, **limits)
        # the sandbox sees the declared tool code as a command would mount it: its snapshot
        request = replace(request, snapshot=project_snapshot([wf], state_dir=state_dir))
        self.counter += 1
        result = run_episode(
            request,
            backend=backend,
            settings=settings,
            provider=provider,
            id_factory=sequential_ids(f"it{self.counter}"),
            command=command,
            hello_timeout_s=hello_timeout_s,
            **({"monotonic": monotonic} if monotonic is not None else {}),
        )
        lines = [json.loads(x) for x in result.trace_path.read_text().splitlines()]
        return Outcome(result, lines)


PURE_TOOLS = """
from runner.sdk import Effect, tool

@tool("util.echo", effect=Effect.PURE)
def echo(text: str) -> str:
    return text
"""

PURE_STEPS = """
- id: echo
  tool: util.echo
  args: {text: hi}
"""


def protocol_script(body: str) -> tuple[str, ...]:
    """A sandbox command speaking the protocol by hand (to test the channel, not the runtime).

    ``body`` runs after hello/start with ``send(msg)``, ``raw(bytes)``, ``err(text)`` in scope;
    the script then sends a succeeded episode and waits for shutdown.
    """
    script = (
        textwrap.dedent(
            """
        import json, os, sys
        def raw(data):
            view = memoryview(data)
            while view:
                n = os.write(1, view)
                view = view[n:]
        def send(msg):
            raw(json.dumps(msg, ensure_ascii=False).encode("utf-8") + b"\\n")
        def err(text):
            os.write(2, text.encode("utf-8"))
        def recv():
            line = sys.stdin.buffer.readline()
            return json.loads(line) if line else None
        send({"type": "hello", "protocol": 1, "python": sys.version.split()[0], "pid": os.getpid()})
        assert recv()["type"] == "start"
        """
        )
        + textwrap.dedent(body)
        + textwrap.dedent(
            """
        send({"type": "episode", "status": "succeeded", "output": "done", "error": None,
              "not_run": []})
        recv()
        """
        )
    )
    return ("python3", "-u", "-c", script)
