"""The gate's first pass: validate a batch, chunk by chunk, and judge it as a whole.

Pure: no ledger, no Airflow. A reader's chunks go through the column check (first chunk), the
typed conversion and the GX suite; findings are kept per row (only failing rows cost memory),
business keys are tracked across chunks for duplicates, the freshness column is tallied per day.
:meth:`BatchValidator.check_batch` then judges the batch (row count, exception rate, freshness)
and raises :class:`~conveyor.gate.errors.BatchRejected` for a batch failure.

Both gates use it (:mod:`conveyor.gate.runner`), and so does a reviewer's correction, validated
again by the gate that quarantined it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from conveyor.gate.batch_checks import check_columns, check_freshness, check_row_count, date_counts
from conveyor.gate.columns import (
    PARSE_EXPECTATION,
    ParseFailure,
    add_computed,
    guess_date_format,
    number_spelling,
    typed_frame,
)
from conveyor.gate.errors import BatchRejected
from conveyor.gate.failures import RowFailure, safe_value, show
from conveyor.gate.readers import Chunk, SourceReader
from conveyor.gate.storable import is_non_finite_text, unstorable_cells
from conveyor.gate.suites import GateSuite

if TYPE_CHECKING:
    import pandas as pd

    from conveyor.gate.ledger_input import LedgerReader
    from conveyor.gate.validation import SuiteValidator

    GateInput = SourceReader | LedgerReader

log = logging.getLogger(__name__)

UNIQUE = "expect_column_values_to_be_unique"
NOT_NULL = "expect_column_values_to_not_be_null"

#: A chunk with its typed frame and the cells that did not parse (row, column).
TypedChunk = tuple[Chunk, Any, set[tuple[int, str]]]


@dataclass
class ValidatedBatch:
    """What the first pass learned of a batch."""

    rows: int = 0
    findings: dict[int, list[RowFailure]] = field(default_factory=dict)
    first_row_of_key: dict[str, int] = field(default_factory=dict)
    repeats: dict[str, list[int]] = field(default_factory=dict)
    unexpected_columns: list[str] = field(default_factory=list)
    #: the freshness column's rows per day, over the whole input
    dates: dict[Any, int] = field(default_factory=dict)
    #: rows holding a value jsonb cannot store (their payload is stored made storable)
    unstorable: set[int] = field(default_factory=set)
    #: the only chunk of a one-chunk batch, kept so the second pass does not read it again
    cached: TypedChunk | None = None
    chunks: int = 0
    #: items read from the ledger: data row -> item id
    item_of_row: dict[int, str] = field(default_factory=dict)

    @property
    def exception_rate(self) -> float:
        return len(self.findings) / self.rows if self.rows else 0.0


class BatchValidator:
    """Validates one batch against a suite: see the module docstring.

    :param suite: the loaded suite.
    :param key_column: the business key column (None: no duplicate check).
    :param required: the columns every input must have.
    :param freshness_column: a date column tallied per day for the freshness check.
    :param max_age: how old the rows may be as a whole; None skips the freshness check.
    :param as_of: the run's reference time (freshness, the suite's date parameters).
    :param suite_parameters: values for the suite's ``$PARAMETER`` placeholders.
    :param max_cell_chars: longer text cells fail their row.
    :param min_rows: fewer data rows fail the batch.
    :param max_exception_rate: the largest share of failing rows that still lets the batch through.
    :param has_header: the input has a header of its own (a file, a query): its columns are checked
        before a row is parsed, and expectations on absent columns are worth a warning. Items read
        from the ledger have the fields they have.
    """

    def __init__(
        self,
        suite: GateSuite,
        *,
        key_column: str | None,
        required: Sequence[str],
        freshness_column: str | None,
        max_age: timedelta | None,
        as_of: datetime,
        suite_parameters: Mapping[str, Any] | None,
        max_cell_chars: int,
        min_rows: int,
        max_exception_rate: float,
        has_header: bool,
    ) -> None:
        if not 0 <= max_exception_rate <= 1:
            raise ValueError(f"max_exception_rate must be between 0 and 1, got {max_exception_rate}")
        self.suite = suite
        self.key_column = key_column
        self.required = list(required)
        self.freshness_column = freshness_column
        self.max_age = max_age
        self.as_of = as_of
        self.suite_parameters = suite_parameters
        self.max_cell_chars = max_cell_chars
        self.min_rows = min_rows
        self.max_exception_rate = max_exception_rate
        self.has_header = has_header
        #: the GX validator, built on the first chunk (its expectation report goes in the batch record)
        self.suite_validator: SuiteValidator | None = None

    def expectation_report(self) -> list[dict[str, Any]]:
        return self.suite_validator.expectation_report() if self.suite_validator else []

    # -- the first pass ------------------------------------------------------------------------

    def validate(self, reader: GateInput) -> ValidatedBatch:
        plan = ValidatedBatch()
        self._precheck_columns(reader)
        for chunk in reader.chunks():
            plan.chunks += 1
            frame = chunk.frame
            if plan.chunks == 1:
                plan.unexpected_columns = self._check_columns(reader, frame)
                self.suite_validator = self._make_validator(frame, plan.unexpected_columns)
            typed, parse_failures = self.typed(frame, reader)
            bad_cells = {(f.row, f.column) for f in parse_failures}
            for failure in parse_failures:
                plan.findings.setdefault(failure.row, []).append(_parse_finding(failure))
            for finding in unstorable_cells(frame):  # a NUL byte, inf: a row failure, not a crash
                plan.findings.setdefault(finding.row, []).append(finding)
                plan.unstorable.add(finding.row)
            if len(frame):
                assert self.suite_validator is not None
                for row, found in self.suite_validator.validate(typed).items():
                    # A value that did not parse is null in the typed frame: "is empty" would be wrong.
                    found = [
                        f for f in found if not (f.expectation == NOT_NULL and (row, f.column) in bad_cells)
                    ]
                    if found:
                        plan.findings.setdefault(row, []).extend(found)
            if chunk.item_ids is not None:
                plan.item_of_row.update(zip((int(r) for r in frame.index), chunk.item_ids, strict=True))
            self._track_keys(plan, frame)
            if self.freshness_column and self.freshness_column in typed.columns and len(typed):
                for day, n in date_counts(typed[self.freshness_column]).items():  # per day: bounded memory
                    plan.dates[day] = plan.dates.get(day, 0) + n
            plan.rows += len(frame)
            plan.cached = (chunk, typed, bad_cells) if plan.chunks == 1 else None
        self._mark_duplicates(plan)
        return plan

    def typed_chunks(self, reader: GateInput) -> Iterator[TypedChunk]:
        """The reader's chunks typed again (the second pass of a batch of more than one chunk)."""
        for chunk in reader.chunks():
            typed, failures = self.typed(chunk.frame, reader)
            yield chunk, typed, {(f.row, f.column) for f in failures}

    def typed(self, frame: pd.DataFrame, reader: GateInput) -> tuple[pd.DataFrame, list[ParseFailure]]:
        typed, failures = typed_frame(frame, self.suite.columns)
        list_failures = getattr(reader, "list_failures", None)
        if list_failures:
            rows = set(frame.index)
            failures = failures + [f for f in list_failures if f.row in rows]
        if self.suite.computed:
            typed = add_computed(typed, self.suite.computed)
        return typed, failures

    def _precheck_columns(self, reader: GateInput) -> None:
        """Fail on missing columns from the header alone, before a row is parsed (a wrong
        delimiter or a renamed column must not surface as a parse error of some later line)."""
        if not self.has_header or not reader.columns:
            return
        if all(c in reader.columns for c in self.required):
            return
        sample = None
        try:
            first = next(reader.chunks(), None)
            sample = first.frame.head(200) if first is not None else None
        except BatchRejected:
            sample = None
        check_columns(
            reader.columns,
            self.suite,
            self.required,
            header_line=reader.header_line,
            sample=sample,
            source_name=short_name(reader),
        )

    def _check_columns(self, reader: GateInput, frame: pd.DataFrame) -> list[str]:
        columns = list(reader.columns) or list(frame.columns)
        if not self.has_header and not len(frame):
            return []
        return check_columns(
            columns,
            self.suite,
            self.required,
            header_line=reader.header_line,
            sample=frame.head(200),
            source_name=short_name(reader),
        )

    def _make_validator(self, frame: pd.DataFrame, extra_columns: Sequence[str]) -> SuiteValidator:
        import pandas as pd

        from conveyor.gate.validation import SuiteValidator, guard_expectations

        text = [c for c, spec in self.suite.columns.items() if spec.is_text and c in frame.columns]
        text += [
            c
            for c in extra_columns
            if c in frame.columns
            and (pd.api.types.is_string_dtype(frame[c].dtype) or frame[c].dtype == object)
        ]
        guards = guard_expectations(text, self.max_cell_chars, self.suite)
        present = set(frame.columns) | set(self.suite.computed)
        expectations_ok = [e for e in self.suite.expectations if _columns_of(e) <= present]
        skipped = [e for e in self.suite.expectations if not _columns_of(e) <= present]
        if skipped and self.has_header:
            log.warning(
                "gate: %d expectations skipped, their columns are absent: %s",
                len(skipped),
                ", ".join(sorted({c for e in skipped for c in _columns_of(e) - present})),
            )
        suite = self.suite if not skipped else replace(self.suite, expectations=tuple(expectations_ok))
        parameters = self.suite.resolve_parameters(self.as_of, self.suite_parameters)
        return SuiteValidator(suite, parameters=parameters, extra=guards)

    def _track_keys(self, plan: ValidatedBatch, frame: pd.DataFrame) -> None:
        if not self.key_column or self.key_column not in frame.columns:
            return
        first = plan.first_row_of_key
        for row, key in zip(frame.index, frame[self.key_column].tolist(), strict=True):
            if key is None or key != key or key == "":
                continue
            key = str(key)
            seen = first.get(key)
            if seen is None:
                first[key] = int(row)
            else:
                plan.repeats.setdefault(key, [seen]).append(int(row))

    def _mark_duplicates(self, plan: ValidatedBatch) -> None:
        """One finding per row of a repeated key, naming every row (across chunks)."""
        if not plan.repeats:
            return
        column = self.key_column
        for key, rows in plan.repeats.items():
            more = " …" if len(rows) > 10 else ""
            if plan.item_of_row:
                listed = ", ".join(plan.item_of_row[r].split(":", 1)[1] for r in rows[:10])
                message = f"{column} {key!r} appears {len(rows)} times in the input (items {listed}{more})"
            else:
                listed = ", ".join(str(r) for r in rows[:10])
                message = f"{column} {key!r} appears {len(rows)} times in the input (rows {listed}{more})"
            for row in rows:
                kept = [
                    f
                    for f in plan.findings.get(row, [])
                    if not (f.expectation == UNIQUE and f.column == column)
                ]
                kept.append(RowFailure(row, UNIQUE, column, key, message))
                plan.findings[row] = kept

    # -- the batch as a whole ------------------------------------------------------------------

    def check_batch(self, plan: ValidatedBatch, reader: GateInput) -> None:
        """Row count, exception rate and freshness; raises :class:`BatchRejected` naming the fix."""
        name = short_name(reader)
        check_row_count(plan.rows, max(self.min_rows, 1), columns=len(reader.columns), source_name=name)
        failing = len(plan.findings)
        rate = failing / plan.rows
        if rate > self.max_exception_rate:
            raise BatchRejected(
                "exception_rate",
                f"{rate:.1%} of rows failed the gate ({failing} of {plan.rows}); at most "
                f"{self.max_exception_rate:.1%} allowed (max_exception_rate). Most frequent: "
                f"{_top_problems(plan)}. Nothing was routed: fix the input and clear this task",
                detail={
                    "rows": plan.rows,
                    "failing_rows": failing,
                    "exception_rate": rate,
                    "max_exception_rate": self.max_exception_rate,
                },
            )
        if self.freshness_column and self.max_age is not None:
            check_freshness(
                plan.dates,
                column=self.freshness_column,
                as_of=self.as_of,
                max_age=self.max_age,
                source_name=name,
            )


def short_name(reader: GateInput) -> str:
    """A file's name, else the reader's description (for messages a person reads)."""
    path = getattr(reader, "path", None)
    if reader.kind in ("csv", "jsonl", "parquet") and path is not None:
        return str(path.name)
    return reader.description


def _parse_finding(failure: ParseFailure) -> RowFailure:
    expected = failure.expected
    if is_non_finite_text(failure.value):
        expected = "a finite number"  # NaN/inf/1e309: a number to Python, never an amount
    elif failure.expected in ("a number", "a whole number") and (spelling := number_spelling(failure.value)):
        expected += f" (written with {spelling}; the feed must send plain numbers such as -1234.56)"
    return RowFailure(
        failure.row,
        PARSE_EXPECTATION,
        failure.column,
        safe_value(failure.value),
        f"{failure.column} {show(failure.value)} is not {expected}",
    )


def _top_problems(plan: ValidatedBatch, limit: int = 3) -> str:
    groups: dict[tuple[str, str | None], list[RowFailure]] = {}
    for failures in plan.findings.values():
        for f in failures:
            groups.setdefault((f.expectation, f.column), []).append(f)
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))[:limit]
    parts = []
    for (expectation, _column), failures in ranked:
        example = failures[0]
        text = f"{example.message} ({len(failures)} rows"
        if expectation == PARSE_EXPECTATION:
            guess = guess_date_format([f.value for f in failures[:20]])
            if guess:
                text += f"; the values look like {guess}"
        parts.append(text + ")")
    return "; ".join(parts)


def _columns_of(expectation: Mapping[str, Any]) -> set[str]:
    kwargs = expectation.get("kwargs", {})
    found = {kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs}
    found.update(kwargs.get("column_list") or [])
    return found
