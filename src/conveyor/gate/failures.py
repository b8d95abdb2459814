"""Row-level findings and the words a reviewer reads about them.

Every failed expectation of a row becomes a :class:`RowFailure` (which expectation, which column,
the offending value, a sentence). An item's ``reason`` is the short form (one line), its
``last_error`` the long form (one line per failed expectation, with the expectation's GX name),
and the gate's result table keeps the structured list.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_SHOWN = 60
REASON_LIMIT = 500


def row_number(label: object) -> int:
    """The data row number a frame's row label (or its ``__row`` cell) stands for.

    The gate's frames are indexed by data row number (a RangeIndex), so every label is an int at
    run time; pandas types a label as any hashable value and a cell as any scalar, hence one
    checked-by-tests conversion here instead of one at every call site.
    """
    number: int = int(label)  # type: ignore[call-overload]  # an int (or numpy integer) at run time, see above
    return number


@dataclass(frozen=True)
class RowFailure:
    """One failed check of one row.

    :param row: the 1-based data row number in the input.
    :param expectation: the GX expectation type (or a ``conveyor_*`` check of the gate itself).
    :param column: the column checked (None for checks across columns).
    :param value: the offending value, shortened for display.
    :param message: a readable sentence naming column, value and rule.
    """

    row: int
    expectation: str
    column: str | None
    value: Any
    message: str

    def as_json(self) -> dict[str, Any]:
        return {
            "expectation": self.expectation,
            "column": self.column,
            "value": self.value,
            "message": self.message,
        }


class Composite(str):
    """Several values already spelled out (``due_date 2026-11-02, invoice_date 2026-11-12``)."""


def show(value: Any) -> str:
    """A value as a reviewer should see it: quoted text, shortened when long, numbers plain."""
    if isinstance(value, Composite):
        return str(value)
    if value is None:
        return "empty"
    try:
        if value != value:  # NaN / NaT
            return "empty"
    except (TypeError, ValueError):
        pass
    if hasattr(value, "isoformat"):
        text: str = value.isoformat()
        return text[:10] if text.endswith("T00:00:00") else text
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".") if abs(value) < 1e15 else f"{value:g}"
    if isinstance(value, str):
        if len(value) > MAX_SHOWN:
            return repr(value[:40] + "…") + f" ({len(value):,} characters)"
        return repr(value)
    return repr(value)


def is_missing(value: Any) -> bool:
    """None, or a NaN / NaT (the only values unequal to themselves) as pandas reads an empty cell."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return False


def safe_value(value: Any) -> Any:
    """The value kept in the JSON of a finding: JSON-friendly, at most a few hundred characters."""
    if is_missing(value):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # jsonb has no inf: kept as the text a person reads
    if isinstance(value, str) and len(value) > 200:
        value = value[:200] + f"… [{len(value):,} characters]"
    if isinstance(value, (int, float, bool)):
        return value
    text = str(value)
    text = text if len(text) <= 200 or isinstance(value, str) else text[:200] + f"… [{len(text):,} characters]"
    return text.replace("\x00", "\u2400")  # a NUL byte, shown as ␀: jsonb cannot store it


def _bound(value: Any) -> str:
    if isinstance(value, Mapping) and "$PARAMETER" in value:
        return str(value["$PARAMETER"])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return show(value)
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,}"


def describe(
    expectation: str,
    kwargs: Mapping[str, Any],
    meta: Mapping[str, Any] | None,
    value: Any,
    *,
    parameters: Mapping[str, Any] | None = None,
) -> str:
    """A sentence about one failed value: the suite's own ``meta.message`` template or a standard one.

    A ``meta.message`` template may use ``{column}``, ``{value}`` and any kwarg (``{min_value}``...).
    """
    column = kwargs.get("column") or kwargs.get("column_A") or ", ".join(kwargs.get("column_list", []) or [])
    resolved = {k: _resolve(v, parameters) for k, v in kwargs.items()}
    template = (meta or {}).get("message")
    if template:
        try:
            return str(template).format(
                column=column,
                value=show(value),
                **{k: _bound(v) for k, v in resolved.items() if k != "column"},
            )
        except (KeyError, IndexError, ValueError):
            pass
    shown = show(value)
    if expectation == "expect_column_values_to_not_be_null":
        return f"{column} is empty"
    if expectation == "expect_column_values_to_be_unique":
        return f"{column} {shown} appears more than once"
    if expectation == "expect_column_values_to_match_regex":
        return f"{column} {shown} does not match the pattern {resolved['regex']}"
    if expectation == "expect_column_values_to_not_match_regex":
        return f"{column} {shown} matches the forbidden pattern {resolved['regex']}"
    if expectation == "expect_column_values_to_be_in_set":
        allowed = resolved.get("value_set") or []
        listed = ", ".join(str(v) for v in list(allowed)[:8]) + (" …" if len(allowed) > 8 else "")
        return f"{column} {shown} is not one of {listed}"
    if expectation == "expect_column_values_to_not_be_in_set":
        return f"{column} {shown} is a forbidden value"
    if expectation == "expect_column_values_to_be_between":
        low, high = resolved.get("min_value"), resolved.get("max_value")
        if low is not None and _below(value, low, resolved.get("strict_min")):
            word = "at or below" if resolved.get("strict_min") else "below"
            return f"{column} {shown} is {word} the minimum {_bound(low)}"
        if high is not None:
            word = "at or above" if resolved.get("strict_max") else "above"
            return f"{column} {shown} is {word} the maximum {_bound(high)}"
        return f"{column} {shown} is out of range"
    if expectation == "expect_column_value_lengths_to_be_between":
        length = len(value) if isinstance(value, str) else None
        limit = resolved.get("max_value")
        if length is not None and limit is not None and length > limit:
            return f"{column} is {length:,} characters long; at most {limit:,} allowed"
        return f"{column} {shown} has a length outside [{resolved.get('min_value')}, {limit}]"
    if expectation == "expect_column_pair_values_a_to_be_greater_than_b":
        word = "on or after" if resolved.get("or_equal") else "after"
        return f"{kwargs['column_A']} must be {word} {kwargs['column_B']} (got {shown})"
    return f"{column} {shown} fails {expectation}"


def _resolve(value: Any, parameters: Mapping[str, Any] | None) -> Any:
    if isinstance(value, Mapping) and "$PARAMETER" in value and parameters:
        return parameters.get(value["$PARAMETER"], value)
    return value


def _below(value: Any, low: Any, strict: Any) -> bool:
    try:
        return bool(value <= low) if strict else bool(value < low)
    except TypeError:
        return False


def reason_for(failures: Sequence[RowFailure]) -> str:
    """The one-line reason of a quarantined item."""
    if not failures:
        return "passed the gate"
    parts = []
    for failure in failures:
        if failure.message not in parts:
            parts.append(failure.message)
    text = f"failed {len(failures)} check{'s' if len(failures) != 1 else ''}: " + "; ".join(parts)
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def error_text(failures: Sequence[RowFailure], *, row_label: str, suite: str) -> str:
    """The long form: one line per failed expectation, with its GX name and the offending value."""
    lines = [f"{row_label} failed the gate (suite {suite!r}):"]
    for failure in failures:
        where = f" on {failure.column}" if failure.column else ""
        lines.append(f"- {failure.expectation}{where}: {failure.message} [value: {show(failure.value)}]")
    return "\n".join(lines)
