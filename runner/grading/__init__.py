"""Tournament grading: listwise judges per task group, openskill ratings across tasks.

Public surface (pinned by tests/unit/grading/test_grading.py):

- values (``runner.grading.model``): `Result`, `ToolCall`, `Group`, `Ranking`;
- judges (``runner.grading.judges``): `parse_judge` (the one parser of ``--judge``: a
  `JudgeSpec`), the registry `JUDGES` and `make_judge` for ``rubric``, ``module:function`` and
  ``model:NAME``; `rubric_judge`, `FunctionJudge`, `ModelJudge` (its provider is built by the
  caller with the provider factory: grading imports no provider);
- aggregation (``runner.grading.tournament``): `grade`, `aggregate`, `TournamentReport`,
  `Standing`.

May import: `runner.ledger` (model judges are charged), `runner.errors`, openskill; never
the episode or anything above it.
"""

from runner.grading.judges import JUDGES, FunctionJudge, Judge, JudgeSpec, make_judge, parse_judge
from runner.grading.model import Group, Ranking, Result, ToolCall
from runner.grading.modeljudge import ModelJudge, Provider
from runner.grading.rubric import rubric_judge
from runner.grading.tournament import Standing, TournamentReport, aggregate, grade

__all__ = [
    "JUDGES",
    "FunctionJudge",
    "Group",
    "Judge",
    "JudgeSpec",
    "ModelJudge",
    "Provider",
    "Ranking",
    "Result",
    "Standing",
    "ToolCall",
    "TournamentReport",
    "aggregate",
    "grade",
    "make_judge",
    "parse_judge",
    "rubric_judge",
]
