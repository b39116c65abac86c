"""Tournament grading: listwise judges per task group, openskill ratings across tasks.

Public surface (pinned by tests/unit/grading/test_grading.py):

- values (``runner.grading.model``): `Result`, `ToolCall`, `Group`, `Ranking`;
- judges (``runner.grading.judges``): `make_judge` for ``rubric``, ``module:function`` and
  ``model:NAME``; `rubric_judge`, `FunctionJudge`, `ModelJudge`;
- aggregation (``runner.grading.tournament``): `grade`, `aggregate`, `TournamentReport`,
  `Standing`.

May import: `runner.ledger` (model judges are charged), `runner.errors`, openskill; never
the episode or anything above it.
"""

from runner.grading.judges import FunctionJudge, Judge, make_judge
from runner.grading.model import Group, Ranking, Result, ToolCall
from runner.grading.modeljudge import ModelJudge, Provider
from runner.grading.rubric import rubric_judge
from runner.grading.tournament import Standing, TournamentReport, aggregate, grade

__all__ = [
    "FunctionJudge",
    "Group",
    "Judge",
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
    "rubric_judge",
]
