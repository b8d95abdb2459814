"""Reading templated operator arguments: what a rendered template means when it names nothing."""

from __future__ import annotations

from typing import Any

#: What a Jinja template renders when its value is missing (``{{ params.x }}`` of a null param...).
BLANKS = frozenset({"", "None", "none", "null"})


def or_none(value: Any) -> Any:
    """``value``, or None when it is None or a rendered blank (``""``, ``"None"``, ``"null"``)."""
    if value is None or (isinstance(value, str) and value.strip() in BLANKS):
        return None
    return value
