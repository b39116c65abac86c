"""Find, read and validate policy files; the loaded `Policy` that the rest of the host uses.

``load_policy("shadow")`` looks in ``./policies/shadow.yaml`` first, then in the packaged
defaults (`runner.resources.policies_dir`); a path (an existing file, or anything with a
separator or a ``.yaml`` / ``.yml`` suffix) is read as is. Every problem is an `InputError`
naming file, line and field.

Invariant: `Policy.hash` is the sha256 of the canonical JSON of the validated model, so two
files that say the same thing (comments, key order, ``5`` vs ``5.0`` aside) hash the same.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner import resources
from runner.domain.registry import Decision, ToolSpec
from runner.domain.yamlsource import load_yaml, validation_error
from runner.errors import InputError
from runner.policy.decisions import decide
from runner.policy.models import Ceilings, Limits, PolicySpec, Price, RateLimits
from runner.policy.redaction import rules_document
from runner.sdk import canonical_json
from runner.wire.argrules import RuleSet

__all__ = ["Policy", "load_policy", "policy_from_spec"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


@dataclass(frozen=True)
class Policy:
    """A loaded policy.

    Attributes:
        spec: the validated content.
        source: where it came from, as shown in diagnostics (relative to the current directory
            when inside it, e.g. ``policies/shadow.yaml``).
        path: the file, or None for a policy built in code.
        hash: sha256 hex of the canonical JSON of ``spec``.
        rules: ``spec.rules`` compiled by the call-time evaluator (`runner.wire.argrules`).
    """

    spec: PolicySpec
    source: str
    path: Path | None = None
    hash: str = field(default="")
    rules: RuleSet = field(default_factory=RuleSet, compare=False, repr=False)

    @property
    def name(self) -> str:
        """The policy's name (``shadow``, ``reproduce``, ...)."""
        return self.spec.name

    @property
    def mode(self) -> str:
        """``shadow`` or ``reproduce``: how the tools that remain are served."""
        return self.spec.mode

    @property
    def limits(self) -> Limits:
        """Per-run resource limits."""
        return self.spec.limits

    @property
    def ceilings(self) -> Ceilings:
        """Spend ceilings per purpose."""
        return self.spec.ceilings

    @property
    def prices(self) -> dict[str, Price]:
        """Model id (or glob) -> price in USD per million input/output tokens."""
        return self.spec.prices

    @property
    def rate_limits(self) -> RateLimits:
        """Provider rate limits per model, and the longest wait an episode may have on them."""
        return self.spec.rate_limits

    @property
    def redaction_rules(self) -> dict[str, Any]:
        """The redaction rules document of the policy (`runner.policy.redaction`)."""
        return rules_document(self.spec.redaction)

    def decide(self, tool: ToolSpec) -> Decision:
        """Present or absent, executed or recorded: see `runner.policy.decisions`."""
        return decide(self.spec, self.source, tool)

    def mapped(self, tool: ToolSpec) -> ToolSpec:
        """``tool`` with the effect class the policy's ``map:`` gives it.

        Only a tool that declares no effect class and was fully read is mapped (a tool's
        own declaration wins; what a static reading could not read stays ``unsafe``).
        """
        found = self.spec.mapped_effect(tool.id)
        if found is None or tool.declared_effect is not None or tool.unread is not None:
            return tool
        key, effect = found
        why = f'policy map "{key}" in {self.source}'
        return replace(tool, effect=effect, decided_by=why)

    def summary(self) -> dict[str, Any]:
        """``{"name", "mode", "hash"}``: the policy as the manifest and traces name it."""
        return {"name": self.name, "mode": self.mode, "hash": self.hash}

    def argument_rules(self) -> list[dict[str, Any]]:
        """The argument rules in the evaluator's JSON form (the manifest's ``policy.rules``)."""
        return [rule.to_json() for rule in self.spec.rules]


def policy_from_spec(spec: PolicySpec, source: str, path: Path | None = None) -> Policy:
    """A `Policy` of an already validated ``spec``, with its hash computed."""
    # a policy without a redaction section or argument rules keeps the hash it had before
    # those existed
    data = spec.model_dump(mode="json")
    if spec.redaction is None:
        del data["redaction"]
    if not data["rules"]:
        del data["rules"]
    if not data["map"]:  # likewise a policy without a map
        del data["map"]
    digest = hashlib.sha256(canonical_json(data).encode("utf-8"))
    rules = RuleSet.from_json([rule.to_json() for rule in spec.rules], source, "rules")
    return Policy(spec=spec, source=source, path=path, hash=digest.hexdigest(), rules=rules)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _is_path(name_or_path: str | Path) -> bool:
    # An existing file is always a path (an error is then about its content, never its name).
    if isinstance(name_or_path, Path) or Path(name_or_path).is_file():
        return True
    text = str(name_or_path)
    return os.sep in text or "/" in text or text.endswith((".yaml", ".yml"))


def find_policy(name_or_path: str | Path, *, field: str = "--policy") -> Path:
    """The file ``load_policy`` would read for ``name_or_path``.

    ``field`` names the argument in errors (``--policy``; ``policy diff``: ``OLD``, ``NEW``).

    Raises:
        InputError: no such file, or no policy of that name locally or among the defaults.
    """
    if _is_path(name_or_path):
        path = Path(name_or_path)
        if not path.exists():
            raise InputError("policy file not found", file=str(path))
        return path  # a folder, a FIFO or a device: the bounded reader says which
    name = str(name_or_path)
    if not _NAME.match(name):
        raise InputError(
            f"policy name {name!r} must be 1-64 ASCII letters, digits, _ or -, or a path",
            field=field,
        )
    local = Path("policies") / f"{name}.yaml"
    if local.is_file():
        return local
    try:
        defaults = resources.policies_dir()
    except FileNotFoundError as exc:
        raise InputError(f"policy {name!r} not found: {exc}", field=field) from exc
    packaged = defaults / f"{name}.yaml"
    if packaged.is_file():
        return packaged
    known = sorted(p.stem for p in defaults.glob("*.yaml"))
    raise InputError(
        f"no policy {name!r}: not in ./policies/ nor among the defaults ({', '.join(known)})",
        field=field,
    )


def load_policy(name_or_path: str | Path, *, field: str = "--policy") -> Policy:
    """Load a policy by name (``./policies/NAME.yaml``, then the packaged default) or path.

    Args:
        name_or_path: ``shadow``, ``reproduce``, another name, or a path to a YAML file.
        field: the argument that named it, in errors (``--policy``; ``policy diff``: ``OLD``
            and ``NEW``, its positional arguments).

    Returns:
        The validated policy with its source and hash.

    Raises:
        InputError: not found, unreadable, invalid YAML, an unknown key (named, with its line)
            or a bad value.
    """
    path = find_policy(name_or_path, field=field)
    source = _display(path)
    doc = load_yaml(path, what="policy")
    if not isinstance(doc.data, dict):
        raise InputError("a policy must be a YAML mapping", file=source, line=doc.line_of(()))
    if "steps" in doc.data and "mode" not in doc.data:
        raise InputError(
            "this is a workflow file (it has steps:), not a policy: pass a policy name "
            "(shadow, reproduce) or a policy YAML file",
            file=source,
            line=doc.line_of(("steps",)),
            field=field,
        )
    try:
        spec = PolicySpec.model_validate(doc.data)
    except ValidationError as exc:
        raise validation_error(doc, exc, PolicySpec, what="policy") from None
    return policy_from_spec(spec, source, path)
