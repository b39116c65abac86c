r"""The ``rules:`` of a policy file: argument rules, decided at call time (docs/policy-format.md).

Shape (one entry)::

    rules:
      - name: no-recursive-rm          # named in every decision it makes
        tool: shell.run                # id or glob
        action: deny                   # deny | allow
        when:                          # every condition must hold; {} holds for every call
          command: {matches: '\brm\s+-[a-z]*r'}
      - name: api-hosts
        tool: http.get
        action: allow                  # an allow rule makes the tool's calls an allow list
        when:
          url: {host_in: [api.example.com, "*.internal.example.com"]}

The validated rules are compiled by the one evaluator, `runner.wire.argrules` (standard
library, mounted into the sandbox): what passes here compiles there, and the same code decides a
call in the sandbox and in ``policy diff``. Effect classes stay structural (a denied class is
absent from the registry); rules only decide calls of tools that are present.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.errors import InputError
from runner.wire.argrules import Rule

__all__ = ["ArgCondition", "ArgRule"]

_ARG = re.compile(r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}\Z")
_TOOL = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]+\Z")


class ArgCondition(BaseModel):
    """One condition on one argument: exactly one of the four keys.

    Attributes:
        matches: a Python regular expression, searched in the value's text (a string as is,
            anything else as its canonical JSON) in time linear in the text
            (`runner.wire.linearre`: a text over 65,536 characters, or a search past its
            step budget, is not decided and the rule denies the call). Back-references,
            look-arounds, conditionals, atomic groups, possessive quantifiers, groups nested
            over 100 deep and repeats expanding past 20,000 instructions are refused at load.
        equals: the JSON value the argument must equal.
        in_: JSON values, one of which the argument must equal (key ``in``).
        host_in: host globs (case-insensitive) the host of the URL in the argument must match.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    matches: str | None = None
    equals: Any = None
    in_: list[Any] | None = Field(default=None, alias="in")
    host_in: list[str] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ArgCondition:
        if len(self.model_fields_set) != 1:
            raise ValueError("a condition is exactly one of matches, equals, in, host_in")
        return self

    def to_json(self) -> dict[str, Any]:
        """``{kind: operand}``, the evaluator's form."""
        (name,) = self.model_fields_set
        key = "in" if name == "in_" else name
        return {key: getattr(self, name)}


class ArgRule(BaseModel):
    """One argument rule (see the module docstring).

    Attributes:
        name: 1-64 ASCII letters, digits, ``_``, ``.`` or ``-``; unique in the policy.
        tool: a tool id or glob (fnmatch, case-sensitive).
        action: ``deny`` or ``allow``.
        when: argument (``a.b`` reaches into objects) -> condition; all must hold.
        description: free text, shown by ``check``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tool: str
    action: Literal["deny", "allow"]
    when: dict[str, ArgCondition] = Field(default_factory=dict)
    description: str = ""

    @field_validator("tool")
    @classmethod
    def _tool(cls, value: str) -> str:
        if not _TOOL.match(value):
            raise ValueError(f"{value!r} is not a tool id or glob (e.g. 'shell.*')")
        return value

    @field_validator("when")
    @classmethod
    def _arguments(cls, when: dict[str, ArgCondition]) -> dict[str, ArgCondition]:
        for arg in when:
            if not _ARG.match(arg):
                raise ValueError(f"{arg!r} is not an argument name (or a.b path)")
        return when

    @model_validator(mode="after")
    def _compiles(self) -> ArgRule:
        """Compile with the evaluator itself: what it refuses is refused here, named."""
        try:
            Rule(self.to_json(), "policy", "rule")
        except InputError as exc:
            field = str(exc.fields.get("field", "rule"))
            message = str(exc.message).removeprefix(f"policy: {field}: ")
            raise ValueError(
                f"rule {self.name!r}: {field.removeprefix('rule.')}: {message}"
            ) from None
        return self

    def to_json(self) -> dict[str, Any]:
        """The rule in the evaluator's JSON form (what the manifest carries)."""
        data: dict[str, Any] = {"name": self.name, "tool": self.tool, "action": self.action}
        data["when"] = {arg: cond.to_json() for arg, cond in self.when.items()}
        if self.description:
            data["description"] = self.description
        return data

    def summary(self) -> str:
        """``deny shell.run when command matches '...'`` (for ``check``)."""
        parts = [
            f"{arg} {kind.replace('_', ' ')} {operand!r}"
            for arg, cond in self.when.items()
            for kind, operand in cond.to_json().items()
        ]
        when = " when " + " and ".join(parts) if parts else " (every call)"
        return f"{self.action} {self.tool}{when}"
