"""A gated row as the item's payload: what the ledger stores of a row and what a reviewer sees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor.gate.failures import is_missing, safe_value

if TYPE_CHECKING:
    import pandas as pd

    from conveyor.gate.suites import GateSuite


def row_payloads(
    frame: pd.DataFrame,
    typed: pd.DataFrame,
    bad_cells: set[tuple[int, str]],
    suite: GateSuite,
    max_cell_chars: int,
) -> list[dict[str, Any]]:
    """Each row as the item's payload: typed values (ISO dates, numbers), the text as read when
    a value did not parse, long text cut at ``max_cell_chars``."""
    import pandas as pd

    limit = max_cell_chars
    columns: dict[str, list[Any]] = {}
    for name in frame.columns:
        spec = suite.columns.get(name)
        raw = frame[name]
        if spec is None or spec.is_text:
            values = raw.astype(object).where(raw.notna(), None).tolist()
            if pd.api.types.is_string_dtype(raw.dtype):
                lengths = raw.str.len().fillna(0)
                for position in (lengths > limit).to_numpy().nonzero()[0]:
                    value = values[position]
                    values[position] = value[:limit] + f"… [truncated by the gate: {len(value):,} characters]"
        else:
            series = typed[name]
            if spec.kind == "date":
                values = series.dt.strftime("%Y-%m-%d").astype(object).where(series.notna(), None).tolist()
            elif spec.kind == "datetime":
                values = [v.isoformat() if v == v else None for v in series.tolist()]
            elif spec.kind == "integer":
                values = [int(v) if v == v else None for v in series.tolist()]
            else:
                values = [float(v) if v == v else None for v in series.tolist()]
            first = int(frame.index[0]) if len(frame) else 0
            for row, column in bad_cells:
                if column == name:
                    values[row - first] = _plain(raw.iat[row - first])
        columns[name] = values
    names = list(columns)
    return (
        [dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)]
        if names
        else [{} for _ in range(len(frame))]
    )


def trimmed(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A payload as a gate result shows it (long values shortened)."""
    return {k: safe_value(v) for k, v in payload.items()}


def _plain(value: Any) -> Any:
    if is_missing(value):
        return None
    return value.item() if hasattr(value, "item") else value
