"""What a person may waive: the hard contract of a suite, recorded with every quarantine.

A gate's findings are of two kinds. **Hard** checks are the step's contract: a required field
empty, a value that is not of its column's type, a value not in the form the later steps read
(a pattern, a length, a formula guard). A later step (a report sorted by supplier, a sum of
amounts) breaks on them, so a person must correct the item: approving it as it is cannot be
allowed. **Business rules** (a duplicate id, an amount above a threshold, a value outside a set)
are judgements: a person may approve such an item as it is.

The kind of each expectation has a default (:data:`HARD_EXPECTATIONS`); a suite overrides it per
expectation with ``"meta": {"waivable": true | false}``.

The gate records both on the item's move to ``quarantined`` (a
:class:`conveyor.quarantine.QuarantineDetail` in the audit row's ``detail``), so the API server
decides without the suite file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from conveyor.gate.columns import PARSE_EXPECTATION
from conveyor.quarantine import ColumnContract, InputContract, RecordedCheck

if TYPE_CHECKING:
    from conveyor.gate.failures import RowFailure
    from conveyor.gate.suites import GateSuite

#: Expectations whose failure a person cannot waive by default: required, type, form.
HARD_EXPECTATIONS: frozenset[str] = frozenset(
    {
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_value_lengths_to_be_between",
        "expect_column_values_to_be_of_type",
        "expect_column_values_to_be_in_type_list",
        PARSE_EXPECTATION,
    }
)


def overrides_of(suite: GateSuite) -> dict[tuple[str, str | None], bool]:
    """(expectation type, column) -> waivable, for the expectations whose meta says so."""
    found: dict[tuple[str, str | None], bool] = {}
    for exp in suite.expectations:
        meta = exp.get("meta") or {}
        if isinstance(meta, Mapping) and isinstance(meta.get("waivable"), bool):
            found[(str(exp["type"]), (exp.get("kwargs") or {}).get("column"))] = meta["waivable"]
    return found


def is_waivable(expectation: str, column: str | None, overrides: Mapping[tuple[str, str | None], bool]) -> bool:
    """May a person approve an item that failed this check as it is?

    :param expectation: the GX expectation type (or a ``conveyor_*`` check of the gate).
    :param column: the column checked.
    :param overrides: the suite's own word (:func:`overrides_of`).
    """
    for key in ((expectation, column), (expectation, None)):
        if key in overrides:
            return overrides[key]
    return expectation not in HARD_EXPECTATIONS


def recorded_checks(
    findings: Sequence[RowFailure], overrides: Mapping[tuple[str, str | None], bool]
) -> tuple[RecordedCheck, ...]:
    """The findings as the quarantine records them, each with whether a person may waive it."""
    return tuple(
        RecordedCheck(f.column, f.expectation, f.message, is_waivable(f.expectation, f.column, overrides))
        for f in findings
    )


def contract_of(suite: GateSuite) -> InputContract:
    """The suite's typed columns and required fields (what a correction is coerced to and an
    approval is checked against).

    A field is required when the suite says it may not be empty (``expect_column_values_to_not_be_null``
    not marked waivable); a column that must merely exist in the file may still be empty in a row.

    :param suite: the loaded suite.
    """
    columns = {
        name: ColumnContract(spec.kind, spec.format or None, spec.currency, spec.currency_column)
        for name, spec in suite.columns.items()
    }
    overrides = overrides_of(suite)
    required: list[str] = []
    for exp in suite.expectations:
        column = (exp.get("kwargs") or {}).get("column")
        if exp["type"] == "expect_column_values_to_not_be_null" and column and column not in required:
            if not is_waivable(exp["type"], column, overrides):
                required.append(column)
    return InputContract(columns, tuple(required))
