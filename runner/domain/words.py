"""Counted nouns in messages: ``1 group``, ``2 groups`` (never ``1 groups`` or ``group(s)``).

One helper for every host message that counts something, so that the number and the noun
agree everywhere (a new user read "1 groups" in a plan).
"""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, the noun in the singular when ``n`` is 1, else its plural.

    Args:
        n: the count.
        word: the noun in the singular (``group``).
        plural: its plural when it is not ``word + "s"`` (``entries``, ``judges``).

    Returns:
        ``"1 group"``, ``"0 groups"``, ``"3 groups"``.
    """
    return f"{n} {word if n == 1 else plural or word + 's'}"
