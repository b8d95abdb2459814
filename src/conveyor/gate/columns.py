"""Typed columns: apply the suite's declared column types to the rows as read.

A CSV cell ``"1250.40"`` becomes the number the expectations compare; a cell that does not
parse (``"12,50"``, ``"27/11/2026"`` for an ISO date) becomes a row-level finding naming the
value and the expected form, and is null in the typed frame (so the range checks of GX do not
report it a second time). Numbers are ``float64`` and dates ``datetime64[ns]``, the dtypes for
which Great Expectations' pandas engine compares vectorised.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.gate.failures import row_number
from conveyor.gate.suites import ColumnSpec

if TYPE_CHECKING:
    import pandas as pd

PARSE_EXPECTATION = "conveyor_value_parses_as_type"
#: A plain number (what ``float()`` takes, minus inf/nan); RE2-compatible so pandas stays in pyarrow.
_NUMBER = r" *[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)? *"
#: Common date spellings, to tell the engineer what a column that fails to parse actually holds.
_DATE_GUESSES = (
    ("%d/%m/%Y", "DD/MM/YYYY"),
    ("%m/%d/%Y", "MM/DD/YYYY"),
    ("%d.%m.%Y", "DD.MM.YYYY"),
    ("%Y/%m/%d", "YYYY/MM/DD"),
    ("%d-%m-%Y", "DD-MM-YYYY"),
    ("%Y%m%d", "YYYYMMDD"),
    ("%Y-%m-%d", "YYYY-MM-DD"),
    ("%d %b %Y", "DD Mon YYYY"),
)


@dataclass(frozen=True)
class ParseFailure:
    """A value that is not of its column's declared type."""

    row: int
    column: str
    value: Any
    expected: str


def typed_frame(
    raw: pd.DataFrame, specs: Mapping[str, ColumnSpec]
) -> tuple[pd.DataFrame, list[ParseFailure]]:
    """The rows with declared columns converted to their types, and every value that did not convert.

    Columns not declared in the suite are left as read.
    """
    typed = raw.copy(deep=False)
    failures: list[ParseFailure] = []
    for name, spec in specs.items():
        if name not in raw.columns or spec.kind == "string":
            continue
        converted, bad = convert(raw[name], spec)
        typed[name] = converted
        if bad.any():
            expected = spec.describe()
            failures.extend(
                ParseFailure(row_number(row), name, value, expected) for row, value in raw[name][bad].items()
            )
    return typed, failures


def convert(series: pd.Series, spec: ColumnSpec) -> tuple[pd.Series, pd.Series]:
    """(converted series, mask of non-null values that did not convert)."""
    import pandas as pd

    present = series.notna()
    converted: pd.Series  # float64 for numbers, datetime64 for dates and times
    if spec.kind in ("number", "integer"):
        if pd.api.types.is_bool_dtype(series.dtype):
            return pd.Series(float("nan"), index=series.index, dtype="float64"), present
        if pd.api.types.is_numeric_dtype(series.dtype):
            converted = series.astype("float64")
        else:
            text = _as_text(series)
            looks_numeric = text.str.fullmatch(_NUMBER).fillna(False).astype(bool)
            converted = pd.to_numeric(text.where(looks_numeric), errors="coerce").astype("float64")
            # "1e309" is a plain number in form but past a float's range: inf, which no amount is.
            converted = converted.mask(converted.abs() == float("inf"))
        bad = present & converted.isna()
        if spec.kind == "integer":
            fractional = converted.notna() & (converted % 1 != 0)
            converted = converted.mask(fractional)
            bad = bad | fractional
        return converted, bad
    if spec.is_temporal:
        if pd.api.types.is_datetime64_any_dtype(series.dtype):
            converted = series
            if getattr(series.dt, "tz", None) is not None:
                converted = series.dt.tz_convert("UTC").dt.tz_localize(None)
        else:
            text = _as_text(series)
            converted = pd.to_datetime(text, format=spec.format, errors="coerce")
            if getattr(converted.dt, "tz", None) is not None:
                converted = converted.dt.tz_convert("UTC").dt.tz_localize(None)
        converted = converted.astype("datetime64[ns]")
        return converted, present & converted.isna()
    return series, pd.Series(False, index=series.index)


def _as_text(series: pd.Series) -> pd.Series:
    import pandas as pd

    if pd.api.types.is_string_dtype(series.dtype) and series.dtype != object:
        return series
    return series.map(lambda v: v if isinstance(v, str) or v is None or v != v else str(v)).astype("str")


#: How exports spell numbers a plain parse refuses, each with the words naming that spelling.
_NUMBER_SPELLINGS = tuple((re.compile(f"[-+]?{body}"), words) for body, words in (
    (r"[0-9]{1,3}(?:\.[0-9]{3})+,[0-9]+", "',' for decimals, '.' between thousands"),
    (r"[0-9]{1,3}(?:\.[0-9]{3}){2,}", "'.' between thousands"),
    (r"[0-9]{1,3}(?:,[0-9]{3})+\.[0-9]+|[0-9]{1,3}(?:,[0-9]{3}){2,}", "',' between thousands"),
    (r"[0-9]{1,3},[0-9]{3}", "',' between thousands or for decimals"),
    (r"[0-9]+,[0-9]+", "',' for decimals"),
    (r"[0-9]{1,3}(?:[ \u00a0\u202f'][0-9]{3})+(?:,[0-9]+)?", "spaces or ' between thousands"),
))
_CURRENCY = re.compile(r"^\s*(?:[A-Z]{0,3}[$€£¥₹]|[A-Z]{3})\s*|\s*(?:[$€£¥₹]|[A-Z]{3})\s*$")


def number_spelling(value: Any) -> str | None:
    """What keeps ``value`` from being a plain number, when it is a number spelled the way some
    exports spell one (``'1.234,56-'``: "',' for decimals, '.' between thousands and a trailing
    minus"), else None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    parts = []
    if (bare := _CURRENCY.sub("", text)) != text and bare:
        parts.append("a currency sign")
        text = bare
    core = text[:-1] if text.endswith("-") else text
    for pattern, words in _NUMBER_SPELLINGS:
        if pattern.fullmatch(core):
            parts.append(words)
            break
    else:
        if not re.fullmatch(_NUMBER, core):
            return None
    if core is not text:
        parts.append("a trailing minus")
    if not parts:
        return None
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def guess_date_format(values: list[Any]) -> str | None:
    """The common spelling most of ``values`` follow (``DD/MM/YYYY``...), or None."""
    samples = [str(v) for v in values if isinstance(v, str)][:20]
    if not samples:
        return None
    best, best_hits = None, 0
    for fmt, label in _DATE_GUESSES:
        hits = 0
        for sample in samples:
            try:
                datetime.strptime(sample.strip(), fmt)
                hits += 1
            except ValueError:
                pass
        if hits > best_hits:
            best, best_hits = label, hits
    return best if best_hits >= max(1, len(samples) // 2) else None


def add_computed(frame: pd.DataFrame, computed: Mapping[str, str]) -> pd.DataFrame:
    """Add the suite's computed columns (``DataFrame.eval`` expressions over the typed columns)."""
    from conveyor.gate.errors import BatchRejected

    for name, expression in computed.items():
        try:
            frame[name] = frame.eval(expression, engine="python")
        except Exception as exc:
            raise BatchRejected(
                "suite_error", f"computed column {name} = {expression!r} cannot be evaluated: {exc}"
            ) from None
    return frame
