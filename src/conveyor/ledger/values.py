"""What PostgreSQL's ``jsonb`` cannot store, found before it is written.

``jsonb`` refuses a NUL character in text (``\\u0000``: "unsupported Unicode escape sequence")
and the non-numbers Python's JSON writes for ``NaN`` and ``±Infinity`` ("invalid input syntax for
type json"). An upstream file or a model can hand us either. Every path that writes item data
asks :func:`problem_in` first and turns an answer into a decision a person reads (a quarantined
row, a refused correction, an answer sent to review); the ledger checks the JSON it writes once
more (:func:`check_json_text`), so a path that forgot raises :class:`UnstorableValue` naming
the field instead of a database error mid-write.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from conveyor.ledger.errors import LedgerError

NUL = "\x00"
#: What a NUL byte is shown as in the copy of a value a person reviews (U+2400 SYMBOL FOR NULL).
NUL_SHOWN = "\u2400"


class UnstorableValue(LedgerError, ValueError):
    """Item data holding a value ``jsonb`` cannot store; nothing was written.

    :param problem: which field holds what (``field 'notes' contains a NUL byte``).
    """

    def __init__(self, problem: str, *, item_id: str | None = None) -> None:
        where = f"item {item_id!r}: " if item_id else ""
        super().__init__(f"{where}{problem}; PostgreSQL cannot store it, nothing was written")
        self.problem = problem
        self.item_id = item_id


def problem_in(value: Any, field: str | None = None) -> str | None:
    """The first value under ``value`` that ``jsonb`` cannot store, as a sentence, or None.

    :param value: a JSON-like value (dicts, lists, text, numbers).
    :param field: the name of ``value`` itself, for the sentence (nested keys are joined with ``.``).
    """
    if isinstance(value, str):
        if NUL in value:
            return f"{_name(field, 'the value')} contains a NUL byte"
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"{_name(field, 'the value')} is not a finite number ({value!r})"
        return None
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if isinstance(key, str) and NUL in key:
                return f"a field name under {_name(field, 'the data')} contains a NUL byte"
            found = problem_in(inner, f"{field}.{key}" if field else str(key))
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for position, inner in enumerate(value):
            found = problem_in(inner, f"{field or 'item'}[{position}]")
            if found:
                return found
        return None
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # a numpy scalar
        return problem_in(value.item(), field)
    return None


def storable(value: Any) -> Any:
    """A copy of ``value`` that ``jsonb`` can store: NUL shown as ``␀``, a non-finite number as null.

    For the copy of a refused row a reviewer looks at; the reason names what was replaced.
    """
    if isinstance(value, str):
        return value.replace(NUL, NUL_SHOWN) if NUL in value else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {storable(k) if isinstance(k, str) else k: storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v) for v in value]
    if hasattr(value, "item") and not hasattr(value, "__len__"):
        return storable(value.item())
    return value


def check_json_text(text: str, value: Any, *, item_id: str | None = None) -> None:
    """Raise :class:`UnstorableValue` when ``text`` (the JSON written for ``value``) would be refused.

    The scan of the text is cheap and may flag harmless text (a literal ``NaN`` in a sentence);
    only then is ``value`` itself walked to name the field or clear it.
    """
    if "\\u0000" in text or "NaN" in text or "Infinity" in text:
        problem = problem_in(value)
        if problem:
            raise UnstorableValue(problem, item_id=item_id)


def _name(field: str | None, default: str) -> str:
    return f"field {field!r}" if field else default
