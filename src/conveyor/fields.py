"""Reading a field of an item's data by a dotted path (``payload.amount``, ``line_items.0``...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def dig(value: Any, path: str) -> Any:
    """The value at ``path`` (dots go deeper into mappings); None when any part is missing."""
    if "." not in path and type(value) is dict:  # the common case, without an ABC check
        return value.get(path)
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value
