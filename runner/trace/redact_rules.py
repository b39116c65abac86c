r"""Redaction rules: the built-in secret detectors, the JSON rules document, JSON paths.

Standard library only, Python 3.9+: the recorder in a user's process and the in-sandbox code
read the same document (`parse_rules`); the host writes it from a policy's ``redaction:``
section (`runner.policy.redaction`). The document (JSON)::

    {"version": 1,
     "detectors": ["openai", "anthropic", "aws_access_key", "aws_secret_key", "github",
                   "jwt", "bearer"],                    # absent: every built-in detector
     "headers": ["authorization", "x-api-key"],         # absent: DEFAULT_HEADERS
     "paths": [{"name": "customer_ssn", "path": "$..ssn"}],
     "patterns": [{"name": "ssn", "regex": "\\b\\d{3}-\\d{2}-\\d{4}\\b"}]}

A pattern's whole match is the secret, or only its group named ``value`` when it has one. A
path's value (a string or a number) is the secret wherever the path reaches, and so is a
header's value: the value of a mapping key equal to a header name (any case), and the rest of
a ``Name: value`` text line.

Built-in detectors and the sources of their patterns (`DETECTORS`):

- ``openai``: ``sk-`` and ``sk-proj-`` / ``sk-svcacct-`` / ``sk-admin-`` keys
  (platform.openai.com/docs/api-reference/authentication; GitHub secret scanning's
  "OpenAI API Key" pattern, docs.github.com/en/code-security/secret-scanning/introduction/
  supported-secret-scanning-patterns).
- ``anthropic``: ``sk-ant-`` keys (``sk-ant-api03-…``, ``sk-ant-admin01-…``;
  docs.anthropic.com/en/api/overview, the ``x-api-key`` header).
- ``aws_access_key``: access key ids with the prefixes ``AKIA`` (long-term) and ``ASIA``
  (temporary), 20 upper-case letters and digits (docs.aws.amazon.com/IAM/latest/UserGuide/
  reference_identifiers.html, "Understanding unique ID prefixes").
- ``aws_secret_key``: a 40-character secret access key after ``aws_secret_access_key`` (the
  shared credentials file's key name, docs.aws.amazon.com/cli/latest/userguide/
  cli-configure-files.html); a bare 40-character string is not guessed at.
- ``github``: ``ghp_`` ``gho_`` ``ghu_`` ``ghs_`` ``ghr_`` tokens and ``github_pat_``
  fine-grained tokens (github.blog, "Behind GitHub's new authentication token formats", 2021).
- ``jwt``: a JWS compact serialisation, three base64url segments, header and payload starting
  ``eyJ`` (base64url of ``{"``; RFC 7515 section 7.1, RFC 7519 section 3).
- ``bearer``: the token after ``Bearer `` (RFC 6750 section 2.1, the ``b64token`` syntax).
"""

import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Pattern, Tuple, Union

from runner.trace import strictjson

__all__ = [
    "DEFAULT_HEADERS",
    "DETECTORS",
    "MAX_RULES_BYTES",
    "RULES_VERSION",
    "PathRule",
    "PatternRule",
    "Rules",
    "load_rules",
    "parse_path",
    "parse_rules",
    "path_matches",
]

RULES_VERSION = 1
MAX_RULES_BYTES = 1024 * 1024  # a rules file longer than this is refused

# name -> compiled pattern; a group named ``value`` (when present) is the secret
DETECTORS: Dict[str, Pattern[str]] = {
    "anthropic": re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    "openai": re.compile(r"\bsk-(?!ant-)(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,}"),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    "aws_secret_key": re.compile(
        r"(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
    ),
    "github": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    "bearer": re.compile(r"\b[Bb]earer\s+(?P<value>[A-Za-z0-9._~+/-]{8,}=*)"),
}

# Header names whose values are never recorded (RFC 9110 section 11.6.2 Authorization, 11.7.2
# Proxy-Authorization; RFC 6265 Cookie / Set-Cookie; the API-key headers of OpenAI-compatible
# and Anthropic endpoints).
DEFAULT_HEADERS = (
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "openai-api-key",
)

_NAME = re.compile(r"^[a-z0-9_]{1,40}\Z")
_PATH_STEP = re.compile(
    r"\.\.(?P<deep>[A-Za-z0-9_$-]+|\*)|\.(?P<key>[A-Za-z0-9_$-]+|\*)|\[(?P<index>\d+|\*)\]"
)
_MAX_RULES = 200

# one step of a JSON path: ("key", name or "*"), ("index", n or -1 for *), ("deep", name or "*")
PathStep = Tuple[str, Union[str, int]]


class PatternRule(NamedTuple):
    """A named regular expression (``value`` group: the secret, else the whole match)."""

    name: str
    regex: Pattern[str]


class PathRule(NamedTuple):
    """A named JSON path into a trace line (`parse_path` gives ``steps``)."""

    name: str
    path: str
    steps: Tuple[PathStep, ...]


class Rules(NamedTuple):
    """A parsed rules document: detector and pattern rules, header names, paths."""

    patterns: Tuple[PatternRule, ...]
    headers: Tuple[str, ...]
    paths: Tuple[PathRule, ...]


def parse_path(path: str) -> Tuple[PathStep, ...]:
    """Parse ``$.a.b[0][*].c`` / ``$..name`` into steps (keys, indexes, any-depth keys).

    The path is over the trace line as JSON, where a JSON text held in a string (a tool's
    ``body``, ``meta.result``) counts as the value it encodes: ``$.body.customer.ssn``.

    Raises:
        ValueError: not a path of this grammar.
    """
    if not isinstance(path, str) or not path.startswith("$") or len(path) > 400:
        raise ValueError("a JSON path starts with '$' (at most 400 characters)")
    steps: List[PathStep] = []
    at = 1
    while at < len(path):
        match = _PATH_STEP.match(path, at)
        if match is None:
            raise ValueError("bad JSON path step at character {} of {!r}".format(at, path))
        if match.group("deep") is not None:
            steps.append(("deep", match.group("deep")))
        elif match.group("key") is not None:
            steps.append(("key", match.group("key")))
        else:
            index = match.group("index")
            steps.append(("index", -1 if index == "*" else int(index)))
        at = match.end()
    if not steps:
        raise ValueError("the JSON path {!r} names no field".format(path))
    return tuple(steps)


def _list(doc: Dict[str, Any], key: str) -> Optional[List[Any]]:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > _MAX_RULES:
        raise ValueError("[{}] must be a list of at most {} items".format(key, _MAX_RULES))
    return value


def _named(item: Any, key: str, where: str) -> Tuple[str, str]:
    if not isinstance(item, dict) or set(item) != {"name", key}:
        raise ValueError("[{}] must be an object with exactly 'name' and '{}'".format(where, key))
    name, value = item["name"], item[key]
    if not isinstance(name, str) or not _NAME.match(name) or not isinstance(value, str):
        raise ValueError("[{}] name must match [a-z0-9_]{{1,40}}, {} a string".format(where, key))
    return name, value


def parse_rules(doc: Optional[Dict[str, Any]]) -> Rules:
    """Validate a rules document (the module's shape) into `Rules`; None: the defaults.

    Raises:
        ValueError: an unknown key, version or detector, a bad regex or path (the message
            names the field in brackets).
    """
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise ValueError("[redaction] the rules document must be a JSON object")
    unknown = sorted(set(doc) - {"version", "detectors", "headers", "paths", "patterns"})
    if unknown:
        raise ValueError("[{}] unknown key in the redaction rules".format(unknown[0]))
    if doc.get("version", RULES_VERSION) != RULES_VERSION:
        raise ValueError("[version] redaction rules version must be {}".format(RULES_VERSION))
    names = _list(doc, "detectors")
    patterns: List[PatternRule] = []
    for i, name in enumerate(list(DETECTORS) if names is None else names):
        if name not in DETECTORS:
            raise ValueError(
                "[detectors[{}]] unknown detector {!r} (known: {})".format(
                    i, name, ", ".join(sorted(DETECTORS))
                )
            )
        patterns.append(PatternRule(name, DETECTORS[name]))
    for i, item in enumerate(_list(doc, "patterns") or []):
        name, text = _named(item, "regex", "patterns[{}]".format(i))
        try:
            regex = re.compile(text)
        except re.error as exc:
            raise ValueError("[patterns[{}].regex] {}".format(i, exc)) from None
        patterns.append(PatternRule(name, regex))
    headers = _list(doc, "headers")
    if headers is not None and not all(isinstance(h, str) and h for h in headers):
        raise ValueError("[headers] must be a list of header names")
    paths: List[PathRule] = []
    for i, item in enumerate(_list(doc, "paths") or []):
        name, text = _named(item, "path", "paths[{}]".format(i))
        try:
            paths.append(PathRule(name, text, parse_path(text)))
        except ValueError as exc:
            raise ValueError("[paths[{}].path] {}".format(i, exc)) from None
    return Rules(
        patterns=tuple(patterns),
        headers=tuple(h.lower() for h in (DEFAULT_HEADERS if headers is None else headers)),
        paths=tuple(paths),
    )


def load_rules(source: Any) -> Rules:
    """`parse_rules` of a rules document (dict), of a JSON file's path, or None (defaults).

    Raises:
        ValueError: a bad document, or a file over `MAX_RULES_BYTES` or not a JSON object.
        OSError: the file cannot be read.
    """
    if source is None or isinstance(source, dict):
        return parse_rules(source)
    with open(os.fspath(source), "rb") as handle:
        data = handle.read(MAX_RULES_BYTES + 1)
    if len(data) > MAX_RULES_BYTES:
        raise ValueError("[redaction] the rules file is over {} bytes".format(MAX_RULES_BYTES))
    doc = strictjson.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("[redaction] the rules file must hold a JSON object")
    return parse_rules(doc)


def path_matches(steps: Tuple[PathStep, ...], at: Tuple[Union[str, int], ...]) -> bool:
    """True when ``steps`` reach the location ``at`` (keys and list indexes from the root)."""
    return _match(steps, 0, at, 0)


def _match(steps: Tuple[PathStep, ...], s: int, at: Tuple[Union[str, int], ...], a: int) -> bool:
    if s == len(steps):
        return a == len(at)
    if a == len(at):
        return False
    kind, want = steps[s]
    here = at[a]
    if kind == "deep":
        for skip in range(a, len(at)):
            key = at[skip]
            if isinstance(key, str) and want in ("*", key) and _match(steps, s + 1, at, skip + 1):
                return True
        return False
    if kind == "key":
        return isinstance(here, str) and want in ("*", here) and _match(steps, s + 1, at, a + 1)
    return isinstance(here, int) and want in (-1, here) and _match(steps, s + 1, at, a + 1)
