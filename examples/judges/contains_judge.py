"""A custom judge for `submit --judge contains_judge:judge` (docs/judges.md is its contract).

It scores each variant's episode of one task, higher is better:
- an episode that did not succeed scores 0.0;
- otherwise 1.0 for each of the task's ``expected.output_contains`` strings found in the
  output's text, minus 0.25 for each tool call made beyond the first three (a cost of
  wandering), never below 0.0.
It reads only what it is given; it imports nothing of sandbox-replay.
"""

import json


def _text(output):
    """The output as text: a string as is, any other JSON value as its JSON."""
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True)


def judge(group):
    """Score the episodes of one task.

    Args:
        group: ``{"task_id", "repeat", "input", "expected", "results": [{"variant",
            "status", "output", "tool_calls": [{"tool", "args"}]}]}``.

    Returns:
        ``{"scores": {variant: score}}``, one number for every variant of ``results``.
    """
    wanted = (group["expected"] or {}).get("output_contains") or []
    if isinstance(wanted, str):
        wanted = [wanted]
    scores = {}
    for result in group["results"]:
        if result["status"] != "succeeded":
            scores[result["variant"]] = 0.0
            continue
        text = _text(result["output"])
        found = sum(1.0 for needle in wanted if needle in text)
        extra = max(0, len(result["tool_calls"]) - 3)
        scores[result["variant"]] = max(0.0, found - 0.25 * extra)
    return {"scores": scores}
