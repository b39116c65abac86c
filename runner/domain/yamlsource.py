"""YAML documents that remember where every value came from, and errors that say so.

`load_yaml` composes the PyYAML node tree (safe loader), constructs the data from it and keeps
the line of every key and value by path (``("steps", 1, "tool")``). `validation_error` turns a
pydantic `ValidationError` of a model validated from that data into one `InputError` naming
the file, the line and the field of the first problem, with every problem listed.

Invariants: only the safe loader is used (no arbitrary objects); a key repeated in one mapping
is an error (PyYAML would silently keep the last one); lines are 1-based. The rules of the
JSON inputs hold here too, since every document becomes JSON (run.json, hashes, traces): the
file is read by the one bounded reader (`runner.inputfile`: regular files only, size limit per
kind), nesting deeper than `runner.trace.strictjson.MAX_DEPTH` and non-finite numbers (``.inf``,
``.nan``) and scalars their tag's constructor refuses (``2001-13-45``, an integer past Python's
digit limit) are errors naming the line, and so are characters YAML refuses (a NUL byte).
"""

from __future__ import annotations

import difflib
import math
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from runner.errors import InputError
from runner.inputfile import read_input
from runner.trace.strictjson import MAX_DEPTH

Loc = tuple[str | int, ...]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""The safe loader, libyaml's when PyYAML was built with it (its wheels are): the pure-Python
scanner reads about 0.1 MiB/s on a loaded machine, so a workflow of 1.1 MiB (20,000 flow-style
steps, well under its 4 MiB limit) kept ``check`` past 30 s; with libyaml ``check`` of a 4 MiB
one took 18 s instead of 57 s (load 9). Both construct with PyYAML's `yaml.SafeConstructor` (no
arbitrary objects)."""


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file with the 1-based line of every key and value.

    Attributes:
        path: the file as given (shown in errors).
        text: the file's text.
        data: the constructed value (plain dicts, lists and scalars).
        value_lines: path -> line of the value at that path (``()`` is the document).
        key_lines: path -> line of the mapping key naming that path.
    """

    path: Path
    text: str
    data: Any
    value_lines: dict[Loc, int] = field(default_factory=dict)
    key_lines: dict[Loc, int] = field(default_factory=dict)

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        """Line of the deepest part of ``loc`` that exists in the document.

        A key path gives the line of its key; a missing key gives the line of the mapping that
        lacks it. Unknown elements (pydantic's union tags) are skipped.
        """
        matched = self.match(loc)
        if matched in self.key_lines:
            return self.key_lines[matched]
        return self.value_lines.get(matched)

    def match(self, loc: Sequence[str | int]) -> Loc:
        """The longest prefix path of ``loc`` present in the data, skipping unknown elements."""
        node = self.data
        path: list[str | int] = []
        for part in loc:
            in_dict = isinstance(node, dict) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            if not (in_dict or in_list):
                continue  # a pydantic union tag, or a key the data lacks
            node = node[part]
            path.append(part)
        return tuple(path)


def field_name(loc: Sequence[str | int], doc: YamlDocument | None = None) -> str:
    """Dotted field name of a location: ``steps[1].agent.tools[0]``.

    With ``doc``, elements that are not part of the data (pydantic's union tags) are left out,
    except a last identifier (the name of a missing key).
    """
    parts: list[str | int] = list(doc.match(loc)) if doc is not None else list(loc)
    if doc is not None and loc:
        last = loc[-1]
        if (not parts or parts[-1] != last) and isinstance(last, str) and _IDENTIFIER.match(last):
            parts.append(last)
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(document)"


def load_yaml(path: Path, *, what: str) -> YamlDocument:
    """Read and parse one YAML document, keeping the line of every key and value.

    Args:
        path: the file.
        what: what the file is (``workflow``, ``policy``, ``job file``): its size limit
            (`runner.inputfile.LIMITS`) and its name in messages.

    Raises:
        InputError: the file cannot be read (missing, not a regular file, over the size
            limit), is not UTF-8, is not valid YAML, holds several documents, repeats a key in
            one mapping, nests deeper than `MAX_DEPTH`, holds a non-finite number or a scalar
            its tag's constructor refuses (file, line and field named).
    """
    raw = read_input(path, what)  # regular files only, at most LIMITS[what] bytes
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{what} is not UTF-8 text", file=str(path), line=line) from exc
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        value_lines: dict[Loc, int] = {}
        key_lines: dict[Loc, int] = {}
        if node is not None:
            _walk(loader, node, (), value_lines, key_lines, path)
            data = loader.construct_document(node)
        else:
            data = None
    except yaml.reader.ReaderError as exc:  # a NUL or another character YAML does not allow
        line = text[: exc.position].count("\n") + 1
        raise InputError(
            f"{what} holds character U+{exc.character:04X}, which YAML does not allow "
            "(control characters other than tab and newline)",
            file=str(path),
            line=line,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        if exc.context:
            problem = f"{exc.context}: {problem}"
        raise InputError(
            f"invalid YAML: {problem}",
            file=str(path),
            line=mark.line + 1 if mark is not None else None,
        ) from exc
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", file=str(path)) from exc
    except RecursionError:  # a hostile file: [[[[... is no traceback
        raise InputError(f"{what} is nested too deeply", file=str(path)) from None
    finally:
        loader.dispose()
    return YamlDocument(path, text, data, value_lines, key_lines)


MAX_VALUES = 100_000
"""Values (after alias expansion) a document may hold: aliases can expand exponentially."""


def _construct(loader: Any, node: yaml.Node, path: Loc, file: Path) -> Any:
    """``node`` constructed; a scalar its tag's constructor refuses is an `InputError`.

    PyYAML passes on the ValueError of Python's own conversions: a date that does not exist
    (``2001-13-45``), ``!!float "abc"``, decimal text past Python's 4300 digits
    (``sys.get_int_max_str_digits``).
    """
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:
        kind = str(node.tag).rsplit(":", 1)[-1]
        raise InputError(
            f"a value of {len(str(node.value))} characters that is not a valid {kind}: "
            f"{str(exc)[:120]}",
            file=str(file),
            line=node.start_mark.line + 1,
            field=field_name(path),
        ) from None


def _walk(
    loader: Any,
    node: yaml.Node,
    path: Loc,
    value_lines: dict[Loc, int],
    key_lines: dict[Loc, int],
    file: Path,
    ancestors: tuple[int, ...] = (),
) -> None:
    if id(node) in ancestors:
        raise InputError(
            "an alias refers to a value that contains it (recursive YAML)",
            file=str(file),
            line=node.start_mark.line + 1,
            field=field_name(path),
        )
    if len(value_lines) >= MAX_VALUES:
        raise InputError(
            f"more than {MAX_VALUES} values once aliases are expanded",
            file=str(file),
            line=node.start_mark.line + 1,
        )
    if len(path) > MAX_DEPTH:
        raise InputError(
            f"nested too deeply (more than {MAX_DEPTH} levels)",
            file=str(file),
            line=node.start_mark.line + 1,
        )
    value_lines[path] = node.start_mark.line + 1
    inner = (*ancestors, id(node))
    if isinstance(node, yaml.ScalarNode):
        number = _construct(loader, node, path, file)
        if isinstance(number, float) and not math.isfinite(number):
            raise InputError(
                f"{node.value!r} is not a finite number (.inf and .nan cannot be limits, "
                "ceilings or JSON values)",
                file=str(file),
                line=node.start_mark.line + 1,
                field=field_name(path),
            )
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # ``<<: *anchor`` merges are resolved by the constructor
            key = _construct(loader, key_node, path, file)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor reports it
                continue
            if first is not None:
                raise InputError(
                    f"key {key!r} appears twice in one mapping (first on line {first})",
                    file=str(file),
                    line=line,
                    field=field_name((*path, key)),
                )
            seen[key] = line
            key_lines[(*path, key)] = line
            _walk(loader, value_node, (*path, key), value_lines, key_lines, file, inner)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(loader, item, (*path, index), value_lines, key_lines, file, inner)


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The pydantic model class whose fields apply at ``loc`` (for "did you mean")."""
    current: Any = model
    for part in loc:
        while True:  # unwrap Optional / list / dict down to a model
            origin = typing.get_origin(current)
            if origin in (typing.Union, types.UnionType):
                models = [a for a in typing.get_args(current) if _is_model(a)]
                current = models[0] if models else None
            elif origin in (list, tuple, dict):
                current = typing.get_args(current)[-1] if typing.get_args(current) else None
                if isinstance(part, int) or not _is_model(current):
                    break
            else:
                break
        if isinstance(part, int):
            continue
        if _is_model(current) and part in current.model_fields:
            current = current.model_fields[part].annotation
    while typing.get_origin(current) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(current) if _is_model(a)]
        current = models[0] if models else None
    return current if _is_model(current) else None


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _describe(error: Any, doc: YamlDocument, model: type[BaseModel]) -> str:
    kind = error["type"]
    loc = tuple(error["loc"])
    if kind == "extra_forbidden":
        key = loc[-1]
        owner = _model_at(model, doc.match(loc)[:-1])
        known = sorted(owner.model_fields) if owner else []
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        allowed = f"; known keys: {', '.join(known)}" if known and not close else ""
        return f"unknown key {key!r}{hint}{allowed}"
    if kind == "missing":
        return f"missing required key {loc[-1]!r}" if loc else "missing value"
    expected = _EXPECTED.get(kind)
    if expected is not None:  # pydantic's wording names our classes: say it in YAML terms
        return f"expected {expected}, got {_kind_of(error.get('input'))}"
    message = str(error["msg"])
    if message.startswith("Value error, "):
        return message[len("Value error, ") :]
    return message.replace("Input should be", "must be", 1)


# pydantic error types -> what the YAML value should have been.
_EXPECTED = {
    "model_type": "a mapping (key: value lines)",
    "model_attributes_type": "a mapping (key: value lines)",
    "dict_type": "a mapping (key: value lines)",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "string_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}


def _kind_of(value: Any) -> str:
    """A YAML value's kind in words: ``a list``, ``text 'abc'``, ``nothing``."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    text = str(value)
    return f"text {text[:40]!r}" + ("..." if len(text) > 40 else "")


def validation_error(
    doc: YamlDocument, exc: ValidationError, model: type[BaseModel], what: str = "file"
) -> InputError:
    """One `InputError` for every problem pydantic found, located in ``doc``.

    The error's ``file``, ``line`` and ``field`` are those of the first problem; the message
    lists every problem, one ``file:line: field: message`` line each.
    """
    items = []
    # Unknown keys first: a typo (``stpes``) also makes a required key missing, and the typo
    # is the problem to name. Then file order.
    ordered = sorted(
        exc.errors(),
        key=lambda e: (e["type"] != "extra_forbidden", doc.line_of(tuple(e["loc"])) or 0),
    )
    for error in ordered:
        loc = tuple(error["loc"])
        items.append((doc.line_of(loc), field_name(loc, doc), _describe(error, doc, model)))
    line, name, message = items[0]
    for other_line, other_name, other_message in items[1:]:
        where = f"{doc.path}:{other_line}" if other_line else str(doc.path)
        message += f"\n{where}: {other_name}: {other_message}"
    return InputError(message, file=str(doc.path), line=line, field=name, what=what)


def located_error(doc: YamlDocument, loc: Loc, message: str) -> InputError:
    """An `InputError` for a problem found after validation, at ``loc`` in ``doc``."""
    return InputError(message, file=str(doc.path), line=doc.line_of(loc), field=field_name(loc))
