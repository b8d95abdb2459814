"""A reviewer's values, made fit for the step that reads them, or refused naming the field.

A correction is input from a person (a form, a CSV-minded client, a script): ``"1936.40"`` for a
numeric column must land as the number ``1936.4`` the gate and the report compare, or the run
breaks later on ``'<' not supported between instances of 'str' and 'float'``. Every value is
checked before anything is written:

* text holding ``\\u0000`` or a lone surrogate (PostgreSQL's JSON cannot store either), numbers
  that are not finite (``NaN``, ``Infinity``, ``1e400``), values larger than
  :data:`MAX_VALUE_BYTES` once written as JSON: refused;
* with the gate's recorded contract (:mod:`conveyor.gate.contract`): a field the contract does not
  know and the item does not hold is refused; a value is coerced to its column's type (number,
  whole number, date, datetime; text stays text) or refused with the type expected.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from conveyor.quarantine import ColumnContract, InputContract
from conveyor.review.errors import InvalidDecision
from conveyor.review.numbers import NotANumber, typed_number

#: The largest value one corrected field may hold, as JSON (a note, not a file).
MAX_VALUE_BYTES = 64 * 1024
#: A plain number as text (what the gate's typed columns read).
_NUMBER = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")
_DESCRIBE = {"number": "a number", "integer": "a whole number", "date": "a date", "datetime": "a date and time"}


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (a NUL character, a lone surrogate), or None."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (invalid Unicode)"
    return None


def value_problem(value: Any, *, depth: int = 0) -> str | None:
    """Why a JSON value cannot be stored as it is, or None (checked all the way down)."""
    if depth > 32:
        return "is nested too deeply"
    if isinstance(value, float) and not math.isfinite(value):
        return f"is not a finite number ({value!r})"
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, Mapping):
        for key, inner in value.items():
            found = text_problem(str(key)) or value_problem(inner, depth=depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for inner in value:
            found = value_problem(inner, depth=depth + 1)
            if found:
                return found
    return None


def check_values(changes: Mapping[str, Any]) -> None:
    """Refuse what cannot be stored or is too large, naming the field.

    :raises InvalidDecision: a field name or value that cannot be stored, or a value over
        :data:`MAX_VALUE_BYTES`.
    """
    for name, value in changes.items():
        problem = text_problem(str(name))
        if problem:
            raise InvalidDecision(f"the field name {name!r} {problem}")
        problem = value_problem(value)
        if problem:
            raise InvalidDecision(f"the value of {name!r} {problem}; nothing was changed")
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass"))
        if size > MAX_VALUE_BYTES:
            raise InvalidDecision(
                f"the value of {name!r} is {size:,} bytes; a corrected value may hold at most {MAX_VALUE_BYTES:,}"
            )


def coerce_value(name: str, value: Any, column: ColumnContract, row: Mapping[str, Any] | None = None) -> Any:
    """``value`` as the type the gate reads for column ``name``; raises :class:`InvalidDecision`.

    :param name: the field, for the message.
    :param value: what the reviewer sent (None stays None: the gate's required checks judge it).
        A number may be typed as people write one (``1.936,40``, ``R$ 1.936,40`` in the item's
        currency: :func:`conveyor.review.numbers.typed_number`).
    :param column: the contract's column (its type, a date's format, a number's currency).
    :param row: the item's fields as they will be (where a ``currency_column`` is read).
    """
    kind = column.type or "string"
    if value is None:
        return None
    if kind == "string":
        if isinstance(value, bool) or isinstance(value, (dict, list)):
            raise InvalidDecision(f"{name} expects text, got {json.dumps(value)[:80]}")
        return value if isinstance(value, str) else str(value)
    expected = _DESCRIBE.get(kind, kind)
    if kind in ("number", "integer"):
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str) and _NUMBER.fullmatch(value):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = typed_number(value, column.currency_of(row or {}))
            except NotANumber as why:
                raise InvalidDecision(f"{name} expects {expected}: {value.strip()[:80]!r} {why}") from None
        if number is None or not math.isfinite(number):
            raise InvalidDecision(f"{name} expects {expected}, got {json.dumps(value)[:80]}")
        if kind == "integer":
            if not number.is_integer():
                raise InvalidDecision(f"{name} expects {expected}, got {json.dumps(value)[:80]}")
            return int(number)
        return number
    if kind in ("date", "datetime"):
        if not isinstance(value, str) or not value.strip():
            raise InvalidDecision(f"{name} expects {expected}, got {json.dumps(value)[:80]}")
        text = value.strip()
        fmt = column.format
        parsed = _parse_time(text, fmt if fmt and fmt != "ISO8601" else None)
        if parsed is None:
            shown = f" in the form {fmt}" if fmt and fmt != "ISO8601" else " (ISO 8601)"
            raise InvalidDecision(f"{name} expects {expected}{shown}, got {text[:80]!r}")
        # Stored as the gate stores the values it read (ISO), so untouched and corrected fields agree.
        return parsed.strftime("%Y-%m-%d") if kind == "date" else parsed.isoformat()
    return value


def _parse_time(text: str, fmt: str | None) -> datetime | None:
    """``text`` in the column's own form, or in ISO 8601 (how the gate stores what it read)."""
    for parse in ((lambda t: datetime.strptime(t, fmt)) if fmt else None,
                  lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))):  # fmt: skip
        if parse is None:
            continue
        try:
            return parse(text)
        except ValueError:
            continue
    return None


def coerce_changes(
    changes: Mapping[str, Any], contract: InputContract | None, current: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The correction with each value checked and coerced to its column's type.

    :param changes: the reviewer's fields.
    :param contract: the gate's recorded contract (None: values are only checked, not coerced).
    :param current: the item's data now (a field it already holds is never unknown).
    :raises InvalidDecision: naming the field and what it needs.
    """
    check_values(changes)
    columns = contract.columns if contract is not None else {}
    if not columns:
        return dict(changes)
    held = current or {}
    unknown = sorted(k for k in changes if k not in columns and k not in held)
    if unknown:
        raise InvalidDecision(
            f"unknown field(s) {', '.join(repr(k) for k in unknown)}: the gate's contract has "
            f"{', '.join(sorted(columns))}; nothing was changed"
        )
    row = {**held, **changes}  # a correction may fix the currency and the amount together
    return {k: coerce_value(k, v, columns[k], row) if k in columns else v for k, v in changes.items()}
