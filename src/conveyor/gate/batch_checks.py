"""Batch-level checks: the input as a whole (its columns, its size, its age).

A failure here means no row of the batch can be trusted (the founding incident: a renamed column
turned every row into an empty one). Each check raises
:class:`~conveyor.gate.errors.BatchRejected` with a message a data engineer can act on, naming
the column, the count or the date at fault and, for a missing column, the column that looks like
it was renamed.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from conveyor.gate.errors import BatchRejected
from conveyor.gate.readers import ALTERNATIVE_DELIMITERS
from conveyor.gate.suites import GateSuite

if TYPE_CHECKING:
    import pandas as pd


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}


def similar_column(
    missing: str, candidates: Sequence[str], suite: GateSuite, sample: pd.DataFrame | None
) -> tuple[str, str] | None:
    """The candidate that most likely is ``missing`` under another name, with the evidence, or None.

    Evidence, strongest first: the candidate's values match the pattern the suite expects of the
    missing column; the names share a word (``supplier_id``/``vendor_id``) or are spelled alike.
    """
    pattern = suite.patterns().get(missing)
    best: tuple[float, str, str] | None = None
    for candidate in candidates:
        name_score = SequenceMatcher(None, _norm(missing), _norm(candidate)).ratio()
        shared = _tokens(missing) & _tokens(candidate)
        evidence = ""
        score = name_score
        if sample is not None and candidate in sample.columns:
            values = sample[candidate].dropna().astype(str).head(200)
            if pattern and len(values) and values.str.contains(pattern, regex=True).mean() >= 0.8:
                score += 1.0
                evidence = f"its values look like {missing} values, e.g. {values.iloc[0]!r}"
        if shared and name_score >= 0.4:
            score += 0.3
        if score >= 0.6 and (best is None or score > best[0]):
            best = (score, candidate, evidence)
    return (best[1], best[2]) if best else None


def check_columns(
    found: Sequence[str],
    suite: GateSuite,
    required: Sequence[str],
    *,
    header_line: str | None = None,
    sample: pd.DataFrame | None = None,
    source_name: str = "the input",
) -> list[str]:
    """Raise when a required column is missing; return the unexpected extra columns (allowed).

    :param found: the input's columns, in order.
    :param required: the columns every row needs.
    :param header_line: the raw first line of a text file, to recognise another delimiter.
    :param sample: the first rows, to recognise a renamed column by its values.
    """
    found_set = set(found)
    expected = set(suite.columns) | set(required)
    missing = [c for c in required if c not in found_set]
    extra = [c for c in found if c not in expected]
    if not missing:
        return extra
    if header_line is not None and len(found) == 1:
        for delimiter in ALTERNATIVE_DELIMITERS:
            split = next(csv.reader([header_line], delimiter=delimiter))
            if len(split) > 1 and set(split) & set(required):
                shown = "TAB" if delimiter == "\t" else repr(delimiter)
                raise BatchRejected(
                    "delimiter",
                    f"{source_name} is {shown}-delimited: its header splits into {len(split)} columns "
                    f"on {shown} "
                    f"({', '.join(split[:4])}, …) but is one column when read with ','; "
                    "re-export it comma-separated",
                    detail={"delimiter": delimiter, "header": header_line[:500]},
                )
    problems: list[str] = []
    renamed: dict[str, str] = {}
    for column in missing:
        match = similar_column(column, [c for c in extra if c not in renamed.values()], suite, sample)
        if match:
            candidate, evidence = match
            renamed[column] = candidate
            problems.append(
                f"column {column!r} missing; found {candidate!r} (similar)"
                + (f": {evidence}" if evidence else "")
            )
        else:
            problems.append(f"column {column!r} missing")
    hint = (
        " Was a column renamed upstream? Fix the export, or map the column before the gate."
        if renamed
        else f" Columns found: {', '.join(found) or 'none'}."
    )
    raise BatchRejected(
        "missing_columns",
        "; ".join(problems) + "." + hint,
        detail={"missing": missing, "similar": renamed, "found": list(found), "required": list(required)},
    )


def check_row_count(rows: int, min_rows: int, *, columns: int, source_name: str) -> None:
    """An empty input is always a failure; fewer rows than ``min_rows`` too."""
    if rows == 0:
        raise BatchRejected(
            "empty",
            f"no data rows: {source_name} has a header ({columns} columns) but no rows; "
            "an empty extract is never a success, check the export job upstream",
            detail={"rows": 0},
        )
    if rows < min_rows:
        raise BatchRejected(
            "row_count",
            f"only {rows} row{'s' if rows != 1 else ''} in {source_name}; at least {min_rows} expected "
            "(min_rows): the extract looks truncated",
            detail={"rows": rows, "min_rows": min_rows},
        )


#: The share of a delivery's rows whose date judges its freshness: the date 99% of the rows are on
#: or before (the newest date but for the newest 1% of rows). A few mistyped dates (2062, or a
#: plausible one in an old extract) cannot make a stale extract look fresh, nor one old row a fresh
#: one stale, as the single newest or oldest value would; a daily feed's newest day still counts
#: whenever it holds more than 1% of the rows.
FRESHNESS_QUANTILE = 0.99


def check_freshness(
    days: Mapping[Any, int], *, column: str, as_of: datetime, max_age: timedelta, source_name: str
) -> None:
    """The delivery as a whole must be recent: its 99th percentile date at most ``max_age`` old.

    :param days: the column's dates (day resolution) -> how many rows carry each.
    :param column: the date column, for messages.
    :param as_of: the run's reference time.
    :param max_age: how old the 99th percentile date may be.
    :param source_name: the input, for messages.
    """
    import pandas as pd

    reference = (
        pd.Timestamp(as_of).tz_convert("UTC").tz_localize(None)
        if pd.Timestamp(as_of).tzinfo
        else pd.Timestamp(as_of)
    )
    # Dates after the run date are wrong (the suite's range check quarantines such rows), not a
    # sign of freshness: they are left out and named.
    limit = reference.normalize() + pd.Timedelta(days=1)
    future = {day: n for day, n in days.items() if pd.Timestamp(day) > limit}
    counted = sorted((pd.Timestamp(day), n) for day, n in days.items() if day not in future)
    if not counted:
        shown = f"; {sum(future.values())} row(s) are dated after the run date" if future else ""
        raise BatchRejected(
            "stale",
            f"cannot tell how fresh {source_name} is: {column} has no valid value{shown}",
            detail={"freshness_column": column},
        )
    total = sum(n for _, n in counted)
    newest = counted[-1][0]
    high = _quantile(counted, total, FRESHNESS_QUANTILE)
    median = _quantile(counted, total, 0.5)
    age = reference - high
    if age <= pd.Timedelta(max_age):
        return
    recent = sum(n for day, n in counted if reference - day <= pd.Timedelta(max_age))
    ignored = (
        f" ({sum(future.values())} row(s) dated after the run date, e.g. {min(future).date().isoformat()}, "
        "were not counted)"
        if future
        else ""
    )
    raise BatchRejected(
        "stale",
        f"stale data: the newest {column} in {source_name} is {newest.date().isoformat()}, "
        f"{_days(reference - newest)} before the run date {reference.date().isoformat()}; 99% of its "
        f"{total:,} dated rows are from {high.date().isoformat()} or earlier ({_days(age)} old, the median "
        f"{_days(reference - median)}), {recent:,} within the allowed age{ignored}; at most "
        f"{_duration(max_age)} allowed (max_age). Is the extract still being refreshed upstream?",
        detail={
            "freshness_column": column,
            "newest": newest.isoformat(),
            "percentile_99": high.isoformat(),
            "median": median.isoformat(),
            "rows_within_max_age": recent,
            "dated_rows": total,
            "rows_after_run_date": sum(future.values()),
            "as_of": reference.isoformat(),
            "max_age_seconds": max_age.total_seconds(),
        },
    )


def date_counts(values: pd.Series) -> dict[Any, int]:
    """A date column's rows per day (for :func:`check_freshness`, summed over chunks)."""
    present = values.dropna()
    if not len(present):
        return {}
    return {day: int(n) for day, n in present.dt.normalize().value_counts().items()}


def _quantile(counted: Sequence[tuple[Any, int]], total: int, share: float) -> Any:
    """The date at or below which ``share`` of the rows lie (the lower one: never interpolated)."""
    rank = max(0, min(total - 1, int(share * (total - 1))))
    seen = 0
    for day, n in counted:
        seen += n
        if seen > rank:
            return day
    return counted[-1][0]


def _days(delta: Any) -> str:
    days = delta.total_seconds() / 86400
    return f"{days:.0f} day{'s' if round(days) != 1 else ''}"


def _duration(value: timedelta) -> str:
    if value.total_seconds() % 86400 == 0:
        days = int(value.total_seconds() // 86400)
        return f"{days} day{'s' if days != 1 else ''}"
    hours = value.total_seconds() / 3600
    return f"{hours:g} hours"
