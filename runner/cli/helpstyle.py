r"""How ``--help`` reads in a terminal: value names, no type tags, paragraphs that flow.

typer 0.29's rich help shows a type tag on every parameter (``<bool>`` on ``--json``,
``<list[Path]>``, ``<float range> [x>=0]``), writes required arguments as ``{workflow}`` in the
usage line and keeps the source's line breaks inside a docstring's later paragraphs, so help
text breaks mid-sentence at the width of the source file. Importing this module replaces those
four presentation hooks, for every command at once:

- an argument shows its name in capitals (``WORKFLOW``, ``TRACE...``), no type tag, in the
  usage line too (``[JOB_FILE]`` when optional);
- an option shows its ``metavar`` when it has one, nothing when it is a flag, else a plain value
  name from its type (``PATH``, ``TEXT``, ``N``, ``NUMBER``); number ranges are said in the help
  text where they matter, not as ``[x>=0]``;
- a paragraph of a command's help flows as one paragraph (single line breaks become spaces;
  blank lines still separate paragraphs; a paragraph starting with ``\\b`` keeps its lines).

Only rendering changes: parsing, validation and error messages are typer's. The paragraph hook
lives in ``typer.rich_utils``, which imports rich and markdown-it (~a third of a second here):
it is replaced when help is first rendered (``format_help``), not at import, so that a command
that shows no help (``check``) never loads rich.
``tests/unit/cli/test_cli_help.py`` pins the result for every command, so a typer upgrade that
moves these hooks fails there rather than bringing the noise back silently.
"""

from __future__ import annotations

from typing import Any

from typer import core

_VALUE_NAMES = {"int": "N", "float": "NUMBER", "str": "TEXT", "Path": "PATH"}


def _display_name(param: Any) -> str:
    return str(param.metavar or str(param.name).upper())


def _argument_name(param: Any) -> str:
    name = _display_name(param)
    return name if param.nargs == 1 or name.endswith("...") else name + "..."


def _argument_usage(param: Any) -> str:
    name = _argument_name(param)
    return name if param.required else f"[{name}]"


def _option_value_name(param: Any, ctx: Any = None) -> str | None:
    if param.metavar is not None:
        return str(param.metavar) or None
    if param.is_flag or param.count:
        return None
    descriptor = param.type_descriptor
    if descriptor.is_path:
        return "PATH"
    inner = descriptor.annotation
    args = getattr(inner, "__args__", None)
    if descriptor.is_list and args:
        inner = args[0]
    return _VALUE_NAMES.get(getattr(inner, "__name__", ""), "VALUE")


def _flowing(paragraphs: list[str], markup_mode: Any) -> str:
    joined = [
        p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines())
        for p in paragraphs
    ]
    return "\n\n".join(joined)


def _no_type(param: Any, ctx: Any = None) -> None:
    return None


def _no_range(param: Any) -> None:
    return None


def _with_flowing_paragraphs(format_help: Any) -> Any:
    """``format_help`` that first replaces rich_utils' paragraph hook (rich loaded on use)."""
    if getattr(format_help, "_flows", False):  # installed already
        return format_help

    def wrapped(self: Any, ctx: Any, formatter: Any) -> Any:
        # imported on use, not at module top: start-up speed (rich, markdown-it; `check`)
        from typer import rich_utils

        setattr(rich_utils, "_fix_linebreaks", _flowing)  # noqa: B010 - a module's function
        return format_help(self, ctx, formatter)

    wrapped._flows = True  # type: ignore[attr-defined]
    return wrapped


def install() -> None:
    """Replace the hooks (idempotent; called when this module is imported)."""
    hooks: list[tuple[type, str, Any]] = [
        (core.TyperArgument, "display_name_raw", property(_display_name)),
        (core.TyperArgument, "_rich_display_name", _argument_name),
        (core.TyperArgument, "_usage_display_name", _argument_usage),
        (core.TyperArgument, "display_type_rich", _no_type),
        (core.TyperArgument, "_get_number_range_help_str", _no_range),
        (core.TyperOption, "display_type_rich", _option_value_name),
        (core.TyperOption, "_get_number_range_help_str", _no_range),
        (core.TyperCommand, "format_help", _with_flowing_paragraphs(core.TyperCommand.format_help)),
        (core.TyperGroup, "format_help", _with_flowing_paragraphs(core.TyperGroup.format_help)),
    ]
    for owner, name, value in hooks:
        setattr(owner, name, value)


install()
