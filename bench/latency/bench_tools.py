"""The one tool of the benchmark workflow: pure, instant."""

from runner.sdk import Effect, tool


@tool("bench.noop", effect=Effect.PURE, description="Return its argument.")
def noop(value: str) -> str:
    return value
