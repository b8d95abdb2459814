"""Ledger mode: the gate's input is the run's items waiting in the workflow's gate-input status.

The invoice flow extracts fields with an AI step first (``received -> extracted``) and validates
the extracted fields at the gate (``extracted -> validated | quarantined``). Each item becomes one
row: the scalar fields of its AI result (or payload), and for each list field the suite declares
under ``meta.conveyor.lists`` (``line_items``) the aggregate columns ``<list>__count`` and
``<list>__<column>__sum`` / ``__max`` (numbers, and per-element ``computed`` expressions such as
``abs(quantity * unit_price - amount)``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conveyor.gate.columns import ParseFailure, convert
from conveyor.gate.errors import BatchRejected
from conveyor.gate.failures import row_number
from conveyor.gate.readers import DEFAULT_CHUNK_SIZE, Chunk
from conveyor.gate.suites import GateSuite
from conveyor.ledger import Ledger, item_reads

if TYPE_CHECKING:
    import pandas as pd

ITEM_FIELDS = ("payload", "ai_result")


@dataclass
class LedgerReader:
    """Reads the items of one run in one status as gate rows.

    :param ledger: the ledger.
    :param workflow: the workflow.
    :param run_id: the run.
    :param status: the status the gate reads (``Workflow.gate_input``).
    :param item_field: ``ai_result`` (fields an AI step extracted) or ``payload`` (data as received).
    :param suite: the suite (for list fields to flatten).
    """

    ledger: Ledger
    workflow: str
    run_id: str
    status: str
    item_field: str
    suite: GateSuite
    chunk_size: int = DEFAULT_CHUNK_SIZE
    input_hash: str = ""
    columns: list[str] = field(default_factory=list)
    header_line: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    item_ids: list[str] = field(default_factory=list)
    #: element values of list fields that did not parse, found while flattening
    list_failures: list[ParseFailure] = field(default_factory=list)

    kind = "ledger"

    def __post_init__(self) -> None:
        if self.item_field not in ITEM_FIELDS:
            raise ValueError(f"ledger mode reads one of {ITEM_FIELDS}, not {self.item_field!r}")

    @property
    def description(self) -> str:
        return f"ledger: {self.workflow} run {self.run_id!r}, items in {self.status!r} ({self.item_field})"

    def preflight(self) -> None:
        """Fix the set of items to gate (in item id order) and hash their current data."""
        with self.ledger.connect() as conn:
            rows = item_reads.data_digests(conn, self.workflow, self.run_id, self.status, self.item_field)
        digest = hashlib.sha256()
        for item_id, data_md5 in rows:
            digest.update(f"{item_id}\x00{data_md5}\n".encode())
        self.item_ids = [r[0] for r in rows]
        self.input_hash = digest.hexdigest()
        self.notes["items"] = len(self.item_ids)
        first = next(self.chunks(), None)
        self.columns = list(first.frame.columns) if first is not None else []

    def chunks(self) -> Iterator[Chunk]:
        self.list_failures = []
        for start in range(0, len(self.item_ids), self.chunk_size):
            ids = self.item_ids[start : start + self.chunk_size]
            with self.ledger.connect() as conn:
                found = item_reads.data_of(conn, ids, self.item_field)
            records = [found.get(i) for i in ids]
            frame, failures = flatten(records, self.suite, start=start + 1)
            self.list_failures.extend(failures)
            yield Chunk(frame, item_ids=ids)

    def unchanged_since_preflight(self) -> bool:
        return True

    def close(self) -> None:
        """Nothing to release."""


def flatten(
    records: Sequence[Any], suite: GateSuite, *, start: int = 1
) -> tuple[pd.DataFrame, list[ParseFailure]]:
    """One row per record: scalar fields as columns, declared list fields as aggregate columns."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    elements: dict[str, list[dict[str, Any]]] = {name: [] for name in suite.lists}
    for position, record in enumerate(records):
        data = record if isinstance(record, Mapping) else {}
        row: dict[str, Any] = {}
        for key, value in data.items():
            if key in suite.lists:
                for element in value if isinstance(value, list) else []:
                    if isinstance(element, Mapping):
                        elements[key].append({"__row": start + position, **element})
            elif isinstance(value, (dict, list)):
                row[key] = json.dumps(value, ensure_ascii=False, sort_keys=True)
            else:
                row[key] = value
        rows.append(row)
    index = pd.RangeIndex(start, start + len(records))
    frame = pd.DataFrame.from_records(rows, index=index) if rows else pd.DataFrame(index=index)
    failures: list[ParseFailure] = []
    for name, spec in suite.lists.items():
        aggregates, bad = _aggregate(name, elements[name], spec.columns, spec.computed, index)
        failures.extend(bad)
        for column, values in aggregates.items():
            frame[column] = values
    return frame, failures


def _aggregate(
    name: str,
    elements: list[dict[str, Any]],
    columns: Mapping[str, Any],
    computed: Mapping[str, str],
    index: pd.Index,
) -> tuple[dict[str, pd.Series], list[ParseFailure]]:
    import pandas as pd

    out: dict[str, pd.Series] = {}
    failures: list[ParseFailure] = []
    table = (
        pd.DataFrame.from_records(elements)
        if elements
        else pd.DataFrame({"__row": pd.Series([], dtype="int64")})
    )
    counts = table.groupby("__row").size() if len(table) else pd.Series(dtype="int64")
    out[f"{name}__count"] = counts.reindex(index, fill_value=0).astype("float64")
    for column, spec in columns.items():
        if column not in table.columns:
            table[column] = None
        converted, bad = convert(table[column], spec)
        for position in bad[bad].index:
            failures.append(
                ParseFailure(
                    row_number(table.at[position, "__row"]),
                    f"{name}.{column}",
                    table.at[position, column],
                    spec.describe(),
                )
            )
        table[column] = converted
    for column, expression in computed.items():
        try:
            table[column] = (
                table.eval(expression, engine="python") if len(table) else pd.Series(dtype="float64")
            )
        except Exception as exc:
            raise BatchRejected(
                "suite_error", f"computed column {name}.{column} = {expression!r} cannot be evaluated: {exc}"
            ) from None
    numeric = [c for c in [*columns, *computed] if c in table.columns]
    if len(table):
        grouped = table.groupby("__row")[numeric]
        sums, maxes = grouped.sum(min_count=1), grouped.max()
    for column in numeric:
        if len(table):
            out[f"{name}__{column}__sum"] = sums[column].reindex(index).astype("float64")
            out[f"{name}__{column}__max"] = maxes[column].reindex(index).astype("float64")
        else:
            out[f"{name}__{column}__sum"] = pd.Series(float("nan"), index=index)
            out[f"{name}__{column}__max"] = pd.Series(float("nan"), index=index)
    return out, failures
