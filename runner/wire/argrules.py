r"""Argument rules: a policy's call-time decisions on a tool's arguments.

Standard library only, Python 3.9+: the same code decides in the sandbox (the runtime's guard
in `runner.runtime.calls.Caller.call_tool`, the rules read from ``manifest.json`` ->
``policy.rules``) and on the host (``policy diff``, ``check``; `runner.policy.callrules`), so a
call is decided one way wherever it is decided.

A rule (the JSON form of a policy's ``rules:`` entry, docs/policy-format.md)::

    {"name": "no-rm", "tool": "shell.run", "action": "deny",
     "when": {"command": {"matches": "\\brm\\s+-[a-z]*r"}}}

``tool`` is an id or glob (fnmatch, case-sensitive); ``when`` maps an argument (a key of the
call's arguments; ``a.b`` reaches into objects) to one condition: ``matches`` (a regular
expression in Python's syntax, with ``re.search``'s answer over the value's text: a string as
is, anything else as its canonical JSON; searched in time linear in the text by
`runner.wire.linearre`, which refuses back-references, look-arounds, conditionals, atomic
groups and possessive quantifiers at load), ``equals`` (the JSON value), ``in`` (a list of
JSON values) or ``host_in`` (globs, case-insensitive, matched against the host of the URL
the value holds, canonicalised as WHATWG URL parsing does by
`runner.wire.urlhost.url_host`; a host clients could read otherwise, or that is not plain
ASCII LDH labels or an IP literal, is *disputed*: it never holds for an ``allow`` rule and
always holds for a ``deny`` rule, fail closed). Every condition
of ``when`` must hold (and); an empty ``when`` holds for every call; an argument that is absent
makes its condition false.

Decision of one call (`RuleSet.decide`), over the rules whose ``tool`` matches, in file order:
the first rule whose ``when`` holds decides (``allow`` or ``deny``, named). When none holds, the
call is denied if any ``allow`` rule targets the tool (an allow list: the decision names the
first such rule, ``matched`` False) and allowed otherwise (no rule). A value longer than
`MAX_VALUE_CHARS` that a ``matches`` condition would read is not searched, and a search that
needs more than `runner.wire.linearre.MAX_STEPS` steps is not finished: either way the call
is denied by that rule, whatever its action (fail closed: a backtracking search
of ``(.*a){16}$`` over 31 characters took 76 s). The step count depends on the pattern and the
text alone, so the sandbox and ``policy diff`` decide a call the same way.
"""

import fnmatch
import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from runner.errors import CapabilityDenied, InputError
from runner.wire import linearre
from runner.wire.urlhost import url_host

ACTIONS = ("deny", "allow")
CONDITIONS = ("matches", "equals", "in", "host_in")
MAX_VALUE_CHARS = 65536
MAX_RULES = 1000
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
_RULE_KEYS = frozenset(("name", "tool", "action", "when", "description"))


class CallDecision:
    """What the rules decide about one call.

    Attributes:
        allowed: the call may go ahead.
        rule: the name of the rule that decided, or None when no rule targets the tool.
        action: that rule's action (``allow`` / ``deny``), or None.
        matched: True when the rule's ``when`` held; False for an allow list's default denial
            and for no rule at all.
        reason: one line saying why, for diagnostics and the trace.
    """

    __slots__ = ("action", "allowed", "matched", "reason", "rule")

    def __init__(
        self,
        allowed: bool,
        rule: Optional[str],
        action: Optional[str],
        matched: bool,
        reason: str,
    ) -> None:
        self.allowed = allowed
        self.rule = rule
        self.action = action
        self.matched = matched
        self.reason = reason

    def to_json(self) -> Dict[str, Any]:
        """``{allowed, rule, action, matched, reason}``."""
        return {k: getattr(self, k) for k in ("allowed", "rule", "action", "matched", "reason")}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallDecision) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return "CallDecision({!r})".format(self.to_json())


class _Undecided(Exception):
    """A ``matches`` condition that cannot be decided: the rule denies the call unread."""

    def __init__(self, argument: str, why: str) -> None:
        super().__init__(argument)
        self.argument = argument
        self.why = why


class Rule:
    """One compiled rule (see the module docstring for the JSON form)."""

    __slots__ = ("action", "conditions", "name", "raw", "tool")

    def __init__(self, raw: Dict[str, Any], source: str, field: str) -> None:
        unknown = sorted(set(raw) - _RULE_KEYS)
        if unknown:
            raise InputError("unknown key {!r}".format(unknown[0]), file=source, field=field)
        name, tool, action = raw.get("name"), raw.get("tool"), raw.get("action")
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(
                "a rule needs a 'name' of 1-64 ASCII letters, digits, '_', '.' or '-'",
                file=source,
                field=field + ".name",
            )
        if not isinstance(tool, str) or not tool:
            raise InputError("a rule needs a tool id or glob", file=source, field=field + ".tool")
        if action not in ACTIONS:
            raise InputError(
                "action must be one of {}, not {!r}".format(ACTIONS, action),
                file=source,
                field=field + ".action",
            )
        when = raw.get("when") or {}
        if not isinstance(when, dict):
            raise InputError("'when' must be a mapping", file=source, field=field + ".when")
        self.name: str = name
        self.tool: str = tool
        self.action: str = str(action)
        self.raw = raw
        self.conditions: List[Tuple[str, str, Any]] = [
            _condition(str(arg), cond, source, "{}.when.{}".format(field, arg))
            for arg, cond in when.items()
        ]

    def targets(self, tool_id: str) -> bool:
        """True when the rule is about ``tool_id``."""
        return fnmatch.fnmatchcase(tool_id, self.tool)

    def holds(self, args: Any) -> bool:
        """True when every condition holds for ``args``.

        Raises:
            _Undecided: a ``matches`` condition would read a value over `MAX_VALUE_CHARS`, or
                its search ran out of steps.
        """
        return all(
            _holds(kind, operand, arg, args, self.action) for arg, kind, operand in self.conditions
        )


def _condition(arg: str, cond: Any, source: str, field: str) -> Tuple[str, str, Any]:
    if not isinstance(cond, dict) or len(cond) != 1:
        raise InputError(
            "a condition is one of {} (e.g. {{matches: 'rm -rf'}})".format(", ".join(CONDITIONS)),
            file=source,
            field=field,
        )
    kind, operand = next(iter(cond.items()))
    if kind == "matches":
        if not isinstance(operand, str):
            raise InputError("'matches' takes a string", file=source, field=field + ".matches")
        try:
            return arg, kind, linearre.Pattern(operand)
        except re.error as exc:
            raise InputError(
                "not a regular expression: {}".format(exc), file=source, field=field + ".matches"
            ) from None
        except linearre.Unsupported as exc:
            raise InputError(
                "regular expression refused: {} (a rule's expression is searched in time "
                "linear in the text: docs/policy-format.md)".format(exc),
                file=source,
                field=field + ".matches",
            ) from None
    if kind in ("in", "host_in"):
        if not isinstance(operand, list) or (
            kind == "host_in" and not all(isinstance(h, str) and h for h in operand)
        ):
            what = "host globs (strings)" if kind == "host_in" else "JSON values"
            raise InputError(
                "'{}' takes a list of {}".format(kind, what), file=source, field=field + "." + kind
            )
        if kind == "host_in":
            return arg, kind, [h.lower() for h in operand]
        return arg, kind, [_canonical(v) for v in operand]
    if kind == "equals":
        return arg, kind, _canonical(operand)
    raise InputError(
        "unknown condition {!r} (one of {})".format(kind, ", ".join(CONDITIONS)),
        file=source,
        field=field,
    )


_ABSENT = object()


def _value(args: Any, arg: str) -> Any:
    current = args
    for part in arg.split("."):
        if not isinstance(current, dict) or part not in current:
            return _ABSENT
        current = current[part]
    return current


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _canonical(value)


def _host_holds(value: Any, globs: List[str], action: str) -> bool:
    """``host_in``: the value's host matches a glob; a disputed host holds for ``deny`` only."""
    if not isinstance(value, str):
        return False
    if len(value) > MAX_VALUE_CHARS:
        return action == "deny"  # unread: fail closed
    reading = url_host(value)
    if not reading.clear:
        return action == "deny"
    host = reading.host
    return host is not None and any(fnmatch.fnmatchcase(host, glob) for glob in globs)


def _holds(kind: str, operand: Any, arg: str, args: Any, action: str) -> bool:
    value = _value(args, arg)
    if value is _ABSENT:
        return False
    if kind == "matches":
        text = _text(value)
        if len(text) > MAX_VALUE_CHARS:
            raise _Undecided(
                arg,
                "is {} characters, longer than the {} a rule reads".format(
                    len(text), MAX_VALUE_CHARS
                ),
            )
        try:
            return bool(operand.search(text))
        except linearre.BudgetExceeded:
            raise _Undecided(
                arg, "needs more than {} search steps".format(linearre.MAX_STEPS)
            ) from None
    if kind == "equals":
        return bool(_canonical(value) == operand)
    if kind == "in":
        return _canonical(value) in operand
    return _host_holds(value, operand, action)


class RuleSet:
    """A policy's argument rules, in file order.

    Args:
        rules: the compiled rules.
    """

    def __init__(self, rules: Sequence[Rule] = ()) -> None:
        self.rules: List[Rule] = list(rules)

    @classmethod
    def from_json(cls, data: Any, source: str = "manifest.json", field: str = "rules") -> "RuleSet":
        """Compile the JSON list of rules.

        Raises:
            InputError: not a list, too many rules, a duplicate name, or a bad rule (its field
                named, e.g. ``rules[2].when.command.matches``).
        """
        if data is None:
            return cls()
        if not isinstance(data, list):
            raise InputError("rules must be a list", file=source, field=field)
        if len(data) > MAX_RULES:
            raise InputError("more than {} rules".format(MAX_RULES), file=source, field=field)
        rules: List[Rule] = []
        seen = set()
        for i, raw in enumerate(data):
            where = "{}[{}]".format(field, i)
            if not isinstance(raw, dict):
                raise InputError("a rule must be a mapping", file=source, field=where)
            rule = Rule(raw, source, where)
            if rule.name in seen:
                raise InputError(
                    "two rules named {!r}".format(rule.name), file=source, field=where + ".name"
                )
            seen.add(rule.name)
            rules.append(rule)
        return cls(rules)

    def for_tool(self, tool_id: str) -> "RuleSet":
        """The rules that target ``tool_id`` (what the sandbox's tool carries)."""
        return RuleSet([r for r in self.rules if r.targets(tool_id)])

    def names(self) -> List[str]:
        """Every rule's name, in file order."""
        return [r.name for r in self.rules]

    def __bool__(self) -> bool:
        return bool(self.rules)

    def decide(self, tool_id: str, args: Any) -> CallDecision:
        """Decide one call of ``tool_id`` with ``args`` (the module docstring's order).

        Args:
            tool_id: the tool called.
            args: the call's arguments (a JSON object; anything else makes every condition
                false).
        """
        first_allow: Optional[Rule] = None
        for rule in self.rules:
            if not rule.targets(tool_id):
                continue
            if rule.action == "allow" and first_allow is None:
                first_allow = rule
            try:
                held = rule.holds(args)
            except _Undecided as exc:
                return CallDecision(
                    False,
                    rule.name,
                    rule.action,
                    True,
                    "argument {!r} {}: denied unread (fail closed)".format(exc.argument, exc.why),
                )
            if held:
                allowed = rule.action == "allow"
                return CallDecision(
                    allowed,
                    rule.name,
                    rule.action,
                    True,
                    "{} by rule {!r}".format("allowed" if allowed else "denied", rule.name),
                )
        if first_allow is not None:
            return CallDecision(
                False,
                first_allow.name,
                "allow",
                False,
                "no allow rule for {!r} matched (allow list from rule {!r})".format(
                    tool_id, first_allow.name
                ),
            )
        return CallDecision(True, None, None, False, "no argument rule")


def guard(rules: RuleSet, tool_id: str, args: Any, record: Dict[str, Any]) -> None:
    """The call-time guard: refuse a call the rules deny, before anything executes or is served.

    A call the rules decide is noted in ``record["meta"]["argument_rule"]`` (the decision's
    JSON); a tool no rule targets leaves the record as it is.

    Raises:
        CapabilityDenied: the rules deny the call (the message and ``rule`` field name the rule).
    """
    if not rules:
        return
    decision = rules.decide(tool_id, args)
    if decision.rule is None:
        return
    record.setdefault("meta", {})["argument_rule"] = decision.to_json()
    if not decision.allowed:
        raise CapabilityDenied(
            "call of tool {!r} refused by argument rule {!r}: {}; nothing executed".format(
                tool_id, decision.rule, decision.reason
            ),
            tool_id=tool_id,
            rule=decision.rule,
        )
