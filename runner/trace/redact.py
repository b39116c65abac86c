"""Redact secrets from trace lines before they are written: stable, keyed placeholders.

Standard library only, Python 3.9+: `runner.sdk.record` (a user's process), the host's trace
writer, the importers and ``packet`` all use this one engine with a rules document
(`runner.trace.redact_rules`; the host converts a policy's ``redaction:`` section into it).

A secret becomes ``[REDACTED:<rule>:<8 hex>]``, the hex being HMAC-SHA256 of the secret under a
key made with `os.urandom` for one trace (or one import) and never written anywhere: the same
secret gives the same placeholder within the trace, so a replay that feeds a served tool result
into a later model request or tool argument still matches the recording, while a short secret
(an SSN has 10^9 values) cannot be found again by hashing guesses.

Each line that had a secret gets ``redactions``: one ``{field, rule, length, placeholder}``
per field and placeholder (``field`` is the location in the line, ``body``,
``args.token``, ``meta.http[1].body``; ``length`` the secret's length in characters), never the
value. Secrets are found in every string of the line (keys too): by the detectors and patterns,
by header names (a mapping key, or a ``Name: value`` text line), by JSON paths (into JSON text
held in strings as well); then every occurrence of a secret known to the trace is replaced in
every string in its raw form and its JSON-escaped forms (a JSON text inside a string), and in
``base64`` bodies the decoded bytes are replaced before encoding again.

Invariants: the ``run`` line's ``workflow`` is never changed (its ``hash`` names the file
reproduce runs); ``truncated``, ``original_length`` and ``sha256`` of a cut body are kept as
they are (a truncation stays recorded as truncation; its sha256 is of the body as received);
a path or header value shorter than `MIN_GLOBAL` characters is replaced where the rule points
but not searched for elsewhere (it would match unrelated text).
"""

import base64
import hashlib
import hmac
import json
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Pattern, Set, Tuple, Union

from runner.trace import strictjson
from runner.trace.redact_forms import (
    b64,
    forms,
    json_texts,
    scalar,
    strings,
    text_of,
    unescaped,
)
from runner.trace.redact_rules import DETECTORS, PatternRule, Rules, parse_rules, path_matches

__all__ = ["MIN_GLOBAL", "PLACEHOLDER", "Redactor"]

PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9_]{1,40}:[0-9a-f]{8}\]")
MIN_GLOBAL = 4
MIN_SCAN = 4  # texts shorter than this are not searched by patterns
_MAX_SEEN = 200_000
_UNNAMED = re.compile(r"\(\?P<[A-Za-z_]+>")
_MAX_PARSE = 8 * 1024 * 1024  # JSON texts longer than this are scanned as text only
_MAX_AT = 400  # locations deeper than this (JSON texts inside JSON texts ...) are not entered
_SKIP_ROOT = ("v", "type", "redactions")

Location = Tuple[Union[str, int], ...]
_Found = Dict[Tuple[str, str], Dict[str, Any]]  # (field, placeholder) -> its redaction record


def _field(at: Location) -> str:
    out = ""
    for step in at:
        out += "[{}]".format(step) if isinstance(step, int) else ("." if out else "") + step
    return out


class Redactor:
    """Finds and replaces secrets in trace lines under one rules document and one key.

    Args:
        rules: a rules document (`runner.trace.redact_rules.parse_rules`), parsed `Rules`, or
            None for the defaults (every built-in detector, the default header names).
        key: the HMAC key (default: 32 bytes of `os.urandom`; tests pass their own). Never
            written anywhere.

    Attributes:
        redactions: redaction records produced so far (all lines).

    Raises:
        ValueError: a bad rules document (the field in brackets).
    """

    def __init__(
        self, rules: Union[Dict[str, Any], Rules, None] = None, key: Optional[bytes] = None
    ):
        self.rules = rules if isinstance(rules, Rules) else parse_rules(rules)
        self._key = key if key is not None else os.urandom(32)
        self._secrets: Dict[str, Tuple[str, str]] = {}  # secret -> (rule, placeholder)
        self._form_of: Dict[str, str] = {}  # a form -> its secret
        self._regex: Optional[Pattern[str]] = None
        self._bytes_regex: Optional["re.Pattern[bytes]"] = None
        self._header_line: Optional[Pattern[str]] = None
        if self.rules.headers:
            names = "|".join(re.escape(h) for h in self.rules.headers)
            self._header_line = re.compile(
                r"(?im)^[ \t]*(?:{}):[ \t]*(?P<value>[^\r\n]*?)[ \t]*\r?$".format(names)
            )
        self._escaped: Set[str] = set()  # JSON texts whose decoded values held a secret
        self._escaped_b64: Set[str] = set()  # base64 bodies whose \\u escapes hid a secret
        self._located = False  # a header's or a path's value was seen (replaced where it is)
        self._seen: Set[Tuple[int, int]] = set()  # (length, hash) of the texts scanned
        # built-in detectors behind one combined search (most texts hold none); the user's own
        # patterns run on their own (their groups and flags are theirs)
        self._builtin = [r for r in self.rules.patterns if DETECTORS.get(r.name) is r.regex]
        self._own = [r for r in self.rules.patterns if DETECTORS.get(r.name) is not r.regex]
        self._prefilter = (
            re.compile("|".join(_UNNAMED.sub("(?:", r.regex.pattern) for r in self._builtin))
            if self._builtin
            else None
        )
        self.redactions = 0

    # -- placeholders and the secrets of the trace -------------------------------------------

    def placeholder(self, rule: str, secret: str) -> str:
        """``[REDACTED:rule:hex8]``: the secret's HMAC-SHA256 under the trace's key.

        The rule of the first finding wins when several rules find one secret.
        """
        known = self._secrets.get(secret)
        if known is not None:
            return known[1]
        digest = hmac.new(
            self._key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256
        ).hexdigest()
        return "[REDACTED:{}:{}]".format(rule, digest[:8])

    def _learn(self, rule: str, secret: str, searched: bool = True) -> None:
        if not secret or secret in self._secrets or PLACEHOLDER.fullmatch(secret):
            return
        if not searched and len(secret) < MIN_GLOBAL:
            return
        self._secrets[secret] = (rule, self.placeholder(rule, secret))
        for form in forms(secret):
            self._form_of.setdefault(form, secret)
        ordered = sorted(self._form_of, key=len, reverse=True)
        self._regex = re.compile("|".join(re.escape(f) for f in ordered))
        self._bytes_regex = re.compile(
            b"|".join(re.escape(f.encode("utf-8", "surrogatepass")) for f in ordered)
        )

    # -- phase 1: find ------------------------------------------------------------------------

    def learn(self, record: Dict[str, Any]) -> None:
        """Find the secrets of one line (they are then replaced in this and later lines)."""
        self._scan({k: v for k, v in record.items() if not _skipped(record, k)}, (), None)

    def _scan(self, value: Any, at: Location, parent: Any) -> None:
        # the hot loop of a recorded call: locations are built only when paths need them
        if len(at) > _MAX_AT:
            return
        paths, headers = self.rules.paths, self.rules.headers
        if isinstance(value, dict):
            for key, item in value.items():
                here = (*at, key) if paths else at
                if isinstance(key, str):
                    self._scan_text(key, at, parse=False)
                    if headers and key.lower() in headers and scalar(item):
                        self._located = True
                        self._learn("header", text_of(item), searched=False)
                if paths and scalar(item) and self._on_path(here):
                    self._located = True
                    self._learn(self._path_rule(here), text_of(item), searched=False)
                if isinstance(item, str):
                    if key == "body" and value.get("body_encoding") == "base64":
                        decoded = b64(item)
                        if decoded is not None:
                            self._scan_b64(item, decoded, here)
                    else:
                        self._scan_text(item, here, parse=True)
                elif isinstance(item, (dict, list)):
                    self._scan(item, here if paths else (*at, 0), value)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                here = (*at, i) if paths else at
                if paths and scalar(item) and self._on_path(here):
                    self._located = True
                    self._learn(self._path_rule(here), text_of(item), searched=False)
                if isinstance(item, str):
                    self._scan_text(item, here, parse=True)
                elif isinstance(item, (dict, list)):
                    self._scan(item, here if paths else (*at, 0), value)
        elif isinstance(value, str):
            self._scan_text(value, at, parse=True)

    def _scan_text(self, text: str, at: Location, parse: bool) -> None:
        first = len(text) >= MIN_SCAN and self._first_time(text)
        if first:
            if self._prefilter is None or self._prefilter.search(text):
                for rule in self._builtin:
                    self._find(rule, text)
            for rule in self._own:
                self._find(rule, text)
            if self._header_line is not None and ":" in text:
                for match in self._header_line.finditer(text):
                    self._learn("header", match.group("value"), searched=False)
        if not parse or len(text) > _MAX_PARSE:
            return
        # paths reach into every JSON text; escapes can hide a value only the first time seen
        if not (self.rules.paths or (first and "\\" in text)):
            return
        before = len(self._secrets)
        for part in json_texts(text):
            self._scan(part, at, None)
        if len(self._secrets) > before and "\\" in text:
            self._escaped.add(text)  # a secret may hide behind escapes no encoder of ours makes

    def _scan_b64(self, body: str, decoded: bytes, at: Location) -> None:
        text = decoded.decode("utf-8", "replace")
        self._scan_text(text, at, parse=True)
        if "\\u" in text:  # escapes in bytes that are not JSON as a whole: search them decoded
            plain = unescaped(text)
            before = len(self._secrets)
            if plain != text:
                self._scan_text(plain, at, parse=False)
            if len(self._secrets) > before:
                self._escaped_b64.add(body)

    def _find(self, rule: PatternRule, text: str) -> None:
        group = "value" if "value" in rule.regex.groupindex else 0
        kept = [m.span() for m in PLACEHOLDER.finditer(text)] if "[REDACTED:" in text else []
        for match in rule.regex.finditer(text):
            start, end = match.span(group)
            if not any(start < k_end and k_start < end for k_start, k_end in kept):
                self._learn(rule.name, match.group(group) or "")  # never a placeholder's part

    def _first_time(self, text: str) -> bool:
        """False for a text scanned before (a conversation repeats in every later request)."""
        key = (len(text), hash(text))
        if key in self._seen:
            return False
        if len(self._seen) >= _MAX_SEEN:
            self._seen.clear()
        self._seen.add(key)
        return True

    def _on_path(self, at: Location) -> bool:
        return any(path_matches(rule.steps, at) for rule in self.rules.paths)

    def _path_rule(self, at: Location) -> str:
        return next(rule.name for rule in self.rules.paths if path_matches(rule.steps, at))

    # -- phase 2: replace ---------------------------------------------------------------------

    def apply(self, record: Dict[str, Any]) -> Dict[str, Any]:
        """Return the line with every known secret replaced and its ``redactions`` added."""
        if self._regex is None and not self._located:
            return record  # no secret known, no header or path value seen: nothing to change
        found: _Found = {}
        replaced = self._replace(
            {k: v for k, v in record.items() if not _skipped(record, k)}, (), found
        )
        out = {k: (v if _skipped(record, k) else replaced[k]) for k, v in record.items()}
        if found:
            earlier = record.get("redactions")
            out["redactions"] = (list(earlier) if isinstance(earlier, list) else []) + list(
                found.values()
            )
            self.redactions += len(found)
        return out

    def redact(self, record: Dict[str, Any]) -> Dict[str, Any]:
        """`learn` and `apply` one line (a streaming writer's call)."""
        self.learn(record)
        return self.apply(record)

    def redact_all(self, records: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Redact a whole trace: learn from every line first, then replace.

        A secret a rule finds in a late line is so replaced in the earlier ones too.
        """
        lines = list(records)
        for line in lines:
            self.learn(line)
        return [self.apply(line) for line in lines]

    def _note(self, found: "_Found", at: Location, secret: str) -> str:
        rule, placeholder = self._secrets[secret]
        return _record(found, at, rule, secret, placeholder)

    def _whole(self, found: "_Found", at: Location, rule: str, item: Any) -> str:
        secret = text_of(item)
        rule, placeholder = self._secrets.get(secret) or (rule, self.placeholder(rule, secret))
        return _record(found, at, rule, secret, placeholder)

    def _replace(self, value: Any, at: Location, found: "_Found") -> Any:
        if len(at) > _MAX_AT:
            return value
        if isinstance(value, dict):
            out: Dict[str, Any] = {}
            for key, item in value.items():
                here = (*at, key)
                new_key = self._replace_text(key, at, found) if isinstance(key, str) else key
                if scalar(item) and not _is_placeholder(item):
                    if isinstance(key, str) and key.lower() in self.rules.headers:
                        out[new_key] = self._whole(found, here, "header", item)
                        continue
                    if self._on_path(here):
                        out[new_key] = self._whole(found, here, self._path_rule(here), item)
                        continue
                if (
                    key == "body"
                    and isinstance(item, str)
                    and value.get("body_encoding") == "base64"
                ):
                    out[new_key] = self._replace_b64(item, here, found)
                    continue
                out[new_key] = self._replace(item, here, found)
            return out
        if isinstance(value, list):
            items = []
            for i, item in enumerate(value):
                here = (*at, i)
                if scalar(item) and not _is_placeholder(item) and self._on_path(here):
                    items.append(self._whole(found, here, self._path_rule(here), item))
                else:
                    items.append(self._replace(item, here, found))
            return items
        if isinstance(value, str):
            return self._replace_text(value, at, found)
        return value

    def _replace_text(self, text: str, at: Location, found: "_Found") -> str:
        if self._regex is None:
            return text

        def swap(match: "re.Match[str]") -> str:
            return self._note(found, at, self._form_of[match.group(0)])

        out = self._regex.sub(swap, text)
        if text in self._escaped and text.lstrip()[:1] in ("{", "["):
            value = strictjson.loads(out)  # it parsed when learnt; placeholders keep it JSON
            redacted = self._replace(value, at, {})
            if redacted != value:  # still a secret, spelt with unusual escapes: re-encode it
                for secret in strings(value):
                    for form in self._secrets:
                        if form in secret:
                            self._note(found, at, form)
                out = json.dumps(redacted, ensure_ascii=False)
        return out

    def _replace_b64(self, body: str, at: Location, found: "_Found") -> str:
        data = b64(body)
        if data is None or self._bytes_regex is None:
            return body

        def swap(match: "re.Match[bytes]") -> bytes:
            secret = self._form_of[match.group(0).decode("utf-8", "surrogatepass")]
            return self._note(found, at, secret).encode("ascii")

        if body in self._escaped_b64:  # a secret spelt with escapes: replaced decoded
            data = unescaped(data.decode("utf-8", "surrogateescape")).encode(
                "utf-8", "surrogateescape"
            )
        replaced = self._bytes_regex.sub(swap, data)
        return body if replaced == data else base64.b64encode(replaced).decode("ascii")


def _skipped(record: Dict[str, Any], key: str) -> bool:
    return key in _SKIP_ROOT or (key == "workflow" and record.get("type") == "run")


def _record(found: _Found, at: Location, rule: str, secret: str, placeholder: str) -> str:
    field = _field(at)
    found.setdefault(
        (field, placeholder),
        {"field": field, "rule": rule, "length": len(secret), "placeholder": placeholder},
    )
    return placeholder


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and PLACEHOLDER.fullmatch(value) is not None
