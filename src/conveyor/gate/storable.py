"""Values the ledger cannot store, found as row failures (see :mod:`conveyor.ledger.values`).

A NUL byte in a text field (one broken row, or the NUL padding some exporters leave at the end
of a file) and a non-finite number (``NaN``, ``inf``, ``-Infinity`` in a JSON or Parquet input)
would make PostgreSQL refuse the whole write. The gate finds them per cell, so the row is
quarantined with a reason a person can act on, and the copy of the row kept for the reviewer is
made storable (:func:`~conveyor.ledger.values.storable`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from conveyor.gate.failures import RowFailure, row_number, safe_value
from conveyor.ledger.values import NUL, problem_in

if TYPE_CHECKING:
    import pandas as pd

STORABLE_EXPECTATION = "conveyor_value_storable"
def is_non_finite_text(value: object) -> bool:
    """Whether ``value`` is text (a CSV cell, a JSON constant the reader kept as text) that Python
    reads as NaN or an infinity: ``NaN``, ``inf``, ``-Infinity``, or a number past a float's range
    (``1e309``)."""
    if not isinstance(value, str):
        return False
    try:
        return not math.isfinite(float(value))
    except ValueError:
        return False


def unstorable_cells(frame: pd.DataFrame) -> list[RowFailure]:
    """One finding per cell of ``frame`` that ``jsonb`` cannot store (index = data row number)."""
    import numpy as np
    import pandas as pd

    found: list[RowFailure] = []
    for column in frame.columns:
        series = frame[column]
        name = str(column)
        if pd.api.types.is_float_dtype(series.dtype):
            values = series.to_numpy(dtype="float64", na_value=np.nan)
            for position in np.isinf(values).nonzero()[0]:
                value = float(values[position])
                found.append(_finding(int(series.index[position]), name, value,
                                      f"{name} is not a finite number ({value!r})"))  # fmt: skip
        elif pd.api.types.is_string_dtype(series.dtype) and series.dtype != object:
            mask = series.str.contains(NUL, regex=False, na=False).to_numpy(dtype=bool)
            for position in mask.nonzero()[0].tolist():
                found.append(_nul_finding(row_number(series.index[position]), name, series.iat[position]))
        elif series.dtype == object:
            for row, value in series.items():
                if isinstance(value, str):
                    if NUL in value:
                        found.append(_nul_finding(row_number(row), name, value))
                    continue
                problem = problem_in(value, name)
                if problem:
                    found.append(_finding(row_number(row), name, safe_value(str(value)), problem))
    return found


def _nul_finding(row: int, column: str, value: Any) -> RowFailure:
    text = str(value)
    if not text.strip(NUL):
        message = f"{column} is NUL bytes only (padding at the end of the file?)"
    else:
        message = f"{column} contains a NUL byte"
    return _finding(row, column, text, message)


def _finding(row: int, column: str, value: Any, message: str) -> RowFailure:
    from conveyor.ledger.values import storable

    return RowFailure(row, STORABLE_EXPECTATION, column, storable(safe_value(value)), message)
