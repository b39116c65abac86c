r"""A policy's ``redaction:`` section: which secrets traces, imports and packets never keep.

Shape (YAML; the same keys as the JSON rules document the recorder reads,
`runner.trace.redact_rules`)::

    redaction:
      detectors: [openai, anthropic, aws_access_key, aws_secret_key, github, jwt, bearer]
      headers: [authorization, proxy-authorization, cookie, set-cookie, x-api-key]
      paths:
        - {name: customer_ssn, path: "$..ssn"}
      patterns:
        - {name: ssn, regex: '\b\d{3}-\d{2}-\d{4}\b'}

An absent key keeps its default: every built-in detector (`runner.trace.redact_rules.
DETECTORS`, each with the source of its pattern), the default header names; no path, no
pattern. ``detectors: []`` and ``headers: []`` turn those off. A policy without the section
redacts with the defaults. Validation is the rules document's own (`parse_rules`), so a bad
regex or path is an input error naming ``redaction.patterns[0].regex`` at load time.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.trace.redact_rules import RULES_VERSION, parse_rules

__all__ = ["NamedPath", "NamedPattern", "RedactionSpec", "rules_document"]


class NamedPattern(BaseModel):
    """A named regular expression; its group named ``value``, if any, is the secret."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str = Field(pattern=r"^[a-z0-9_]{1,40}$")
    regex: str = Field(min_length=1, max_length=2000)


class NamedPath(BaseModel):
    """A named JSON path into a trace line (``$.args.token``, ``$..ssn``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str = Field(pattern=r"^[a-z0-9_]{1,40}$")
    path: str = Field(min_length=1, max_length=400)


class RedactionSpec(BaseModel):
    """The ``redaction:`` section (module docstring); None fields keep the defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    detectors: list[str] | None = None
    headers: list[str] | None = None
    paths: list[NamedPath] = Field(default_factory=list)
    patterns: list[NamedPattern] = Field(default_factory=list)

    @model_validator(mode="after")
    def _valid_rules(self) -> RedactionSpec:
        parse_rules(self.rules())  # ValueError names the field: pydantic reports it
        return self

    def rules(self) -> dict[str, Any]:
        """The JSON rules document of this section (`runner.trace.redact_rules.parse_rules`)."""
        doc: dict[str, Any] = {"version": RULES_VERSION}
        if self.detectors is not None:
            doc["detectors"] = list(self.detectors)
        if self.headers is not None:
            doc["headers"] = list(self.headers)
        if self.paths:
            doc["paths"] = [p.model_dump() for p in self.paths]
        if self.patterns:
            doc["patterns"] = [p.model_dump() for p in self.patterns]
        return doc


def rules_document(section: RedactionSpec | None) -> dict[str, Any]:
    """The rules document of a policy's section (None: the defaults, ``{"version": 1}``)."""
    return section.rules() if section is not None else {"version": RULES_VERSION}
