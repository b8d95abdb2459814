"""The gate's work, independent of Airflow: validate a batch, then route its rows in the ledger.

Two passes over the input, chunk by chunk, so memory stays bounded whatever its size:

1. **Validate.** Preflight (hash, encoding, header), the column check on the first chunk, then
   every chunk through the typed conversion and the GX suite; findings are kept per row (only
   failing rows cost memory), business keys are tracked across chunks for duplicates. At the end
   the batch-level checks: row count, exception rate, freshness. Any batch failure is recorded
   in the ledger (``conveyor.batches``, status ``quarantined``, with the reason) and raised as
   :class:`~conveyor.gate.errors.BatchRejected`; no item is written.
2. **Route.** Each chunk's rows are received as items (one set-based write), passing items move
   to ``validated``, failing ones to ``quarantined`` with their reasons (the review queue), and
   the findings go to ``conveyor.gate_results``.

Idempotent: the batch record holds the input hash. The same input for the same run again is a
no-op that returns the recorded summary; another input for a run whose batch was accepted is
refused (:class:`~conveyor.gate.errors.InputChanged`). A run that crashed half-way is finished
by the next attempt (receiving is a no-op for items already there, moves are guarded by status).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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
from conveyor.gate.contract import contract_of, overrides_of, recorded_checks
from conveyor.gate.errors import BatchRejected, InputChanged, RepeatedInput
from conveyor.gate.failures import RowFailure, error_text, is_missing, reason_for, safe_value, show
from conveyor.gate.readers import DEFAULT_CHUNK_SIZE, Chunk, SourceReader, reader_for
from conveyor.gate.results import GateResultStore, GateSummary, ResultRow
from conveyor.gate.storable import is_non_finite_text, unstorable_cells
from conveyor.gate.suites import GateSuite, load_suite
from conveyor.ledger import Ledger, NewItem, Route, item_reads
from conveyor.ledger.receiving import no_gc
from conveyor.ledger.statuses import Status
from conveyor.ledger.store import ItemUpdate, item_id_for
from conveyor.ledger.values import storable

if TYPE_CHECKING:
    import pandas as pd

    from conveyor.gate.ledger_input import LedgerReader
    from conveyor.gate.validation import SuiteValidator

log = logging.getLogger(__name__)

LEDGER_SOURCE = "ledger"
UNIQUE = "expect_column_values_to_be_unique"
NOT_NULL = "expect_column_values_to_not_be_null"


@dataclass
class GateConfig:
    """Everything one gate run needs (the operator's parameters, rendered).

    :param workflow: the workflow whose items the gate writes.
    :param run_id: the run that carries the items.
    :param step: the gate's name in batch records and results (the task id).
    :param suite: suite name under ``include/expectations/`` or a path to a suite JSON file.
    :param source: a file path (relative paths are under ``include/``), or ``"ledger"``.
    :param sql: a query to read instead of a file.
    :param conn_id: the Airflow connection the query runs on.
    :param file_format: ``csv``, ``jsonl`` or ``parquet`` when the extension does not say.
    :param key_column: the business key column (default: the suite's ``key_column``).
    :param required_columns: columns every input must have (default: the suite's).
    :param min_rows: fewer data rows fail the batch (an empty input always does).
    :param freshness_column: a date column whose rows must be recent as a whole (default: the suite's).
    :param max_age: how old the 99th percentile date of the rows may be; None skips the freshness check.
    :param max_exception_rate: the largest share of failing rows that still lets the batch through.
    :param chunk_size: rows per chunk.
    :param max_cell_chars: longer text cells fail their row (and are shortened in the payload).
    :param suite_parameters: values for the suite's ``$PARAMETER`` placeholders (override its own).
    :param item_field: ledger mode, which item field holds the data (default: ``ai_result`` when
        the gate reads a status after ``received``, else ``payload``).
    :param as_of: the run's reference time (freshness, "not in the future").
    :param from_status: the status the gate reads (default: the workflow's gate input).
    :param to_status: where passing items go (default: the workflow's gate output, ``validated``).
    :param on_repeat: an input already gated in another run: ``fail`` (default) or ``skip``.
    """

    workflow: str
    run_id: str
    step: str
    suite: str
    source: str | None = None
    sql: str | None = None
    conn_id: str = "postgres_default"
    file_format: str | None = None
    key_column: str | None = None
    required_columns: Sequence[str] | None = None
    min_rows: int = 1
    freshness_column: str | None = None
    max_age: timedelta | None = None
    max_exception_rate: float = 0.1
    chunk_size: int = DEFAULT_CHUNK_SIZE
    max_cell_chars: int = 100_000
    suite_parameters: Mapping[str, Any] | None = None
    item_field: str | None = None
    as_of: datetime = field(default_factory=lambda: datetime.now(UTC))
    from_status: str | None = None
    to_status: str | None = None
    on_repeat: str = "fail"

    @property
    def ledger_mode(self) -> bool:
        return (self.source or "").strip().lower() == LEDGER_SOURCE and not self.sql


@dataclass
class _Validated:
    """What pass 1 learned."""

    rows: int = 0
    findings: dict[int, list[RowFailure]] = field(default_factory=dict)
    first_row_of_key: dict[str, int] = field(default_factory=dict)
    repeats: dict[str, list[int]] = field(default_factory=dict)
    unexpected_columns: list[str] = field(default_factory=list)
    #: the freshness column's rows per day, over the whole input
    dates: dict[Any, int] = field(default_factory=dict)
    #: rows holding a value jsonb cannot store (their payload is stored made storable)
    unstorable: set[int] = field(default_factory=set)
    cached: tuple[Chunk, Any, set[tuple[int, str]]] | None = None
    chunks: int = 0
    #: ledger mode: data row -> item id
    item_of_row: dict[int, str] = field(default_factory=dict)


class GateRunner:
    """Runs one gate: see the module docstring.

    :param config: the run's settings.
    :param ledger: the ledger to write to.
    :param actor: who the audit trail names (``dag.task#try``).
    """

    def __init__(self, config: GateConfig, ledger: Ledger, *, actor: str) -> None:
        self.config = config
        self.ledger = ledger
        self.actor = actor
        self.flow = ledger.workflow(config.workflow)
        self.gate_input = config.from_status or self.flow.gate_input
        self.gate_output = config.to_status or self.flow.gate_output
        for target in (self.gate_output, Status.QUARANTINED):
            if not self.flow.allows(self.gate_input, target):
                raise ValueError(
                    f"workflow {self.flow.name!r} does not allow the gate's move {self.gate_input!r} -> {target!r}"
                )
        if config.on_repeat not in ("fail", "skip"):
            raise ValueError(f"on_repeat must be 'fail' or 'skip', got {config.on_repeat!r}")
        self.results = GateResultStore(ledger)
        self.suite: GateSuite = load_suite(config.suite)
        self.key_column = config.key_column or self.suite.key_column
        self.required = list(config.required_columns or self.suite.required_columns)
        if self.key_column and self.key_column not in self.required and not config.ledger_mode:
            self.required.insert(0, self.key_column)
        self.freshness_column = config.freshness_column or self.suite.freshness_column
        if not 0 <= config.max_exception_rate <= 1:
            raise ValueError(f"max_exception_rate must be between 0 and 1, got {config.max_exception_rate}")
        if not config.ledger_mode and not self.key_column:
            raise ValueError(f"suite {self.suite.name!r} declares no key_column; pass key_column")
        self.validator: SuiteValidator | None = None
        #: the item field the gate validates (``payload``; ledger mode: the reader's)
        self.item_field = "payload"
        #: runs that received rows of this input before (run id -> when), see _owned_by_run
        self._earlier: dict[str, datetime] = {}
        self._cleanup = ExitStack()

    # -- entry point -------------------------------------------------------------------------

    def run(self) -> GateSummary:
        """Gate the batch; returns the summary, raises :class:`BatchRejected` for a batch failure."""
        cfg = self.config
        try:
            reader = self._reader()
        except BatchRejected as exc:
            self.ledger.record_batch(
                cfg.workflow, cfg.run_id, cfg.step, status="quarantined", source=cfg.source or cfg.sql,
                reason=exc.reason, detail={"kind": exc.kind, "suite": self.suite.name},
            )  # fmt: skip
            raise
        summary = GateSummary(
            workflow=cfg.workflow,
            run_id=cfg.run_id,
            step=cfg.step,
            source=reader.description,
            suite=self.suite.name,
            input_hash="",
        )
        try:
            try:
                reader.preflight()
            except BatchRejected as exc:
                exc.input_hash = exc.input_hash or reader.input_hash or None
                self._record_rejection(summary, exc, reader)
                raise
            summary.input_hash = reader.input_hash
            previous = self.ledger.get_batch(cfg.workflow, cfg.run_id, cfg.step)
            if not cfg.ledger_mode and (previous is None or previous["status"] != "accepted"):
                try:
                    self._refuse_repeated_file(reader)
                except RepeatedInput as exc:
                    self._record_rejection(summary, exc, reader)
                    raise
            if not cfg.ledger_mode and previous is not None and previous["status"] == "accepted":
                if previous["input_hash"] != reader.input_hash:
                    raise self._input_changed(previous, reader)
                done = (previous.get("detail") or {}).get("summary")
                if (previous.get("detail") or {}).get("complete") and done:
                    log.info(
                        "gate: %s was already gated for run %s; nothing to do", reader.description, cfg.run_id
                    )
                    return GateSummary.from_json({**done, "rerun": True})
            try:
                plan = self._validate(reader)
                self._batch_checks(plan, reader, previous)
            except BatchRejected as exc:
                self._record_rejection(summary, exc, reader, plan_report=True)
                raise
            if cfg.ledger_mode and plan.rows == 0:
                return self._nothing_waiting(summary, previous)
            summary.rows = plan.rows
            summary.unexpected_columns = plan.unexpected_columns
            summary.exception_rate = len(plan.findings) / plan.rows if plan.rows else 0.0
            self._record(summary, reader, complete=False)
            self._route(reader, plan, summary)
            if not cfg.ledger_mode and summary.already_received and not (summary.validated or summary.quarantined):
                repeated = self._repeated_rows(summary)
                self._record_rejection(summary, repeated, reader)
                raise repeated
            self._record(summary, reader, complete=True)
            log.info(
                "gate: %s rows=%d validated=%d quarantined=%d duplicates=%d conflicts=%d already_received=%d",
                reader.description,
                summary.rows,
                summary.validated,
                summary.quarantined,
                summary.duplicates,
                summary.conflicts,
                summary.already_received,
            )
            return summary
        finally:
            reader.close()
            self._cleanup.close()

    # -- readers -----------------------------------------------------------------------------

    def _reader(self) -> SourceReader | LedgerReader:
        cfg = self.config
        if cfg.ledger_mode:
            from conveyor.gate.ledger_input import LedgerReader

            item_field = cfg.item_field or ("payload" if self.gate_input == self.flow.first else "ai_result")
            self.item_field = item_field
            return LedgerReader(
                self.ledger,
                cfg.workflow,
                cfg.run_id,
                self.gate_input,
                item_field,
                self.suite,
                chunk_size=cfg.chunk_size,
            )
        source, origin = cfg.source, None
        if source and "://" in source and not cfg.sql:
            # An object-storage file: the chunked readers work on a local copy, removed at the end.
            from conveyor import storage

            remote = storage.as_path(source)
            if not storage.is_local(remote):
                if not remote.exists():
                    raise BatchRejected("not_found", f"input file not found: {source}")
                source, origin = str(self._cleanup.enter_context(storage.local_copy(remote))), source
            else:
                source = str(storage.local_path(remote))
        return reader_for(
            source,
            sql=cfg.sql,
            conn_id=cfg.conn_id,
            chunk_size=cfg.chunk_size,
            file_format=cfg.file_format,
            origin=origin,
        )

    # -- pass 1 ------------------------------------------------------------------------------

    def _validate(self, reader: SourceReader | LedgerReader) -> _Validated:
        plan = _Validated()
        self._precheck_columns(reader)
        for chunk in reader.chunks():
            plan.chunks += 1
            frame = chunk.frame
            if plan.chunks == 1:
                plan.unexpected_columns = self._check_columns(reader, frame)
                self.validator = self._make_validator(frame, plan.unexpected_columns)
            typed, parse_failures = self._typed(frame, reader)
            bad_cells = {(f.row, f.column) for f in parse_failures}
            for failure in parse_failures:
                plan.findings.setdefault(failure.row, []).append(self._parse_finding(failure))
            for finding in unstorable_cells(frame):  # a NUL byte, inf: a row failure, not a crash
                plan.findings.setdefault(finding.row, []).append(finding)
                plan.unstorable.add(finding.row)
            if len(frame):
                assert self.validator is not None
                for row, found in self.validator.validate(typed).items():
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

    def _precheck_columns(self, reader: SourceReader | LedgerReader) -> None:
        """Fail on missing columns from the header alone, before a row is parsed (a wrong
        delimiter or a renamed column must not surface as a parse error of some later line)."""
        if self.config.ledger_mode or not reader.columns:
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
            source_name=_short(reader),
        )

    def _check_columns(self, reader: SourceReader | LedgerReader, frame: pd.DataFrame) -> list[str]:
        columns = list(reader.columns) or list(frame.columns)
        if self.config.ledger_mode and not len(frame):
            return []
        return check_columns(
            columns,
            self.suite,
            self.required,
            header_line=reader.header_line,
            sample=frame.head(200),
            source_name=_short(reader),
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
        guards = guard_expectations(text, self.config.max_cell_chars, self.suite)
        present = set(frame.columns) | set(self.suite.computed)
        expectations_ok = [e for e in self.suite.expectations if _columns_of(e) <= present]
        skipped = [e for e in self.suite.expectations if not _columns_of(e) <= present]
        if skipped and not self.config.ledger_mode:
            log.warning(
                "gate: %d expectations skipped, their columns are absent: %s",
                len(skipped),
                ", ".join(sorted({c for e in skipped for c in _columns_of(e) - present})),
            )
        suite = self.suite if not skipped else _replace_expectations(self.suite, expectations_ok)
        parameters = self.suite.resolve_parameters(self.config.as_of, self.config.suite_parameters)
        return SuiteValidator(suite, parameters=parameters, extra=guards)

    def _typed(
        self, frame: pd.DataFrame, reader: SourceReader | LedgerReader
    ) -> tuple[pd.DataFrame, list[ParseFailure]]:
        typed, failures = typed_frame(frame, self.suite.columns)
        list_failures = getattr(reader, "list_failures", None)
        if list_failures:
            rows = set(frame.index)
            failures = failures + [f for f in list_failures if f.row in rows]
        if self.suite.computed:
            typed = add_computed(typed, self.suite.computed)
        return typed, failures

    @staticmethod
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

    def _track_keys(self, plan: _Validated, frame: pd.DataFrame) -> None:
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

    def _mark_duplicates(self, plan: _Validated) -> None:
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

    def _batch_checks(
        self, plan: _Validated, reader: SourceReader | LedgerReader, previous: Mapping[str, Any] | None
    ) -> None:
        cfg = self.config
        name = _short(reader)
        if cfg.ledger_mode and plan.rows == 0:
            return
        if cfg.ledger_mode and previous is not None and previous["status"] == "accepted":
            # Items sent back by reviewers after the run's batch passed: each stands on its own;
            # the batch's size and failure share were judged when it was gated.
            return
        check_row_count(plan.rows, max(cfg.min_rows, 1), columns=len(reader.columns), source_name=name)
        failing = len(plan.findings)
        rate = failing / plan.rows
        if rate > cfg.max_exception_rate:
            raise BatchRejected(
                "exception_rate",
                f"{rate:.1%} of rows failed the gate ({failing} of {plan.rows}); at most "
                f"{cfg.max_exception_rate:.1%} allowed (max_exception_rate). Most frequent: "
                f"{self._top_problems(plan)}. Nothing was routed: fix the input and clear this task",
                detail={
                    "rows": plan.rows,
                    "failing_rows": failing,
                    "exception_rate": rate,
                    "max_exception_rate": cfg.max_exception_rate,
                },
            )
        if self.freshness_column and cfg.max_age is not None and not cfg.ledger_mode:
            check_freshness(
                plan.dates,
                column=self.freshness_column,
                as_of=cfg.as_of,
                max_age=cfg.max_age,
                source_name=name,
            )

    @staticmethod
    def _top_problems(plan: _Validated, limit: int = 3) -> str:
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

    # -- pass 2 ------------------------------------------------------------------------------

    def _route(self, reader: SourceReader | LedgerReader, plan: _Validated, summary: GateSummary) -> None:
        if plan.cached is not None:
            chunks: Any = [plan.cached]
        else:
            if not reader.unchanged_since_preflight():
                raise BatchRejected(
                    "input_changed",
                    f"{reader.description} changed while the gate was reading it; "
                    "clear the task once the file is complete",
                )
            chunks = self._retyped(reader)
        with no_gc():  # a bulk pass: millions of payload dicts and rows that all live to its end
            for chunk, typed, bad_cells in chunks:
                if self.config.ledger_mode:
                    self._route_items(chunk, plan, summary)
                else:
                    self._route_rows(chunk, typed, bad_cells, plan, summary, reader.input_hash)

    def _retyped(self, reader: SourceReader | LedgerReader) -> Any:
        for chunk in reader.chunks():
            typed, failures = self._typed(chunk.frame, reader)
            yield chunk, typed, {(f.row, f.column) for f in failures}

    def _route_rows(
        self,
        chunk: Chunk,
        typed: pd.DataFrame,
        bad_cells: set[tuple[int, str]],
        plan: _Validated,
        summary: GateSummary,
        input_hash: str,
    ) -> None:
        cfg = self.config
        frame = chunk.frame
        payloads = self._payloads(frame, typed, bad_cells)
        if plan.unstorable:
            first = int(frame.index[0]) if len(frame) else 0
            for row in plan.unstorable:
                if 0 <= row - first < len(payloads):
                    payloads[row - first] = storable(payloads[row - first])
        # A key of NUL bytes only is no key at all (padding at the end of a file never gets here).
        keys = [None if isinstance(k, str) and k and not k.strip("\x00") else storable(k)
                for k in frame[self.key_column].tolist()]  # fmt: skip
        new_items: list[NewItem] = []
        row_of_item: dict[str, int] = {}
        routes: dict[str, Route] = {}
        flagged: set[str] = set()  # items of rows with findings
        results: list[ResultRow] = []
        for row, key, payload in zip(frame.index, keys, payloads, strict=True):
            row = int(row)
            if key is None or key != key or key == "":
                key = f"row-{row}@{input_hash[:8]}"
            key = str(key)
            item_id = item_id_for(cfg.workflow, key)
            if plan.first_row_of_key.get(key, row) != row:
                summary.duplicates += 1
                results.append(
                    ResultRow(
                        f"row {row}",
                        row,
                        item_id,
                        "duplicate",
                        [f.as_json() for f in plan.findings.get(row, [])],
                        _trim(payload),
                    )
                )
                continue
            new_items.append(NewItem(business_key=key, payload=payload))
            row_of_item[item_id] = row
            findings = plan.findings.get(row)
            if findings:
                flagged.add(item_id)
            routes[item_id] = self._route_of(findings, row, summary.source)
        # Received and routed in one write: a new item is inserted at its gate outcome, with both
        # audit rows. Items this run received before (a retried task) are moved below, guarded.
        received = self.ledger.receive(
            cfg.workflow,
            cfg.run_id,
            new_items,
            actor=self.actor,
            reason=f"read from {_short_source(summary.source)}",
            routes=routes if self.gate_input == self.flow.first else None,
        )
        routed = set(received.inserted) if self.gate_input == self.flow.first else set()
        owned = set(received.inserted) | self._owned_by_run(received.unchanged)
        summary.already_received += len(set(received.unchanged) - owned)
        for item_id, (other_run, status) in received.conflicts.items():
            summary.conflicts += 1
            row = row_of_item[item_id]
            message = (
                f"{item_id} is already in the ledger from run {other_run!r} (status {status!r}) with "
                "different data; this row was not received"
            )
            results.append(
                ResultRow(
                    f"row {row}",
                    row,
                    item_id,
                    "conflict",
                    [
                        {
                            "expectation": "conveyor_key_not_in_other_run",
                            "column": self.key_column,
                            "value": item_id.split(":", 1)[1],
                            "message": message,
                        }
                    ],
                    _trim(payloads[row - int(frame.index[0])]),
                )
            )
        passing: list[str] = []
        failing: dict[str, ItemUpdate] = {}
        # Routed items without findings are done (validated in the write that received them):
        # counted as a set, the loop below sees only the few flagged ones and a retry's items.
        routed_clean = routed - flagged
        summary.validated += len(routed_clean)
        for item_id in sorted(owned - routed_clean):
            row = row_of_item[item_id]
            findings = plan.findings.get(row)
            if not findings:
                if item_id in routed:
                    summary.validated += 1
                else:
                    passing.append(item_id)
                continue
            if item_id in routed:
                summary.quarantined += 1
            else:
                failing[item_id] = self._quarantine_update(
                    findings, f"row {row} of {_short_source(summary.source)}"
                )
            results.append(
                ResultRow(
                    f"row {row}",
                    row,
                    item_id,
                    "quarantined",
                    [f.as_json() for f in findings],
                    _trim(payloads[row - int(frame.index[0])]),
                )
            )
        self._move(passing, failing, summary)
        self.results.write(
            cfg.workflow, cfg.run_id, cfg.step, suite=self.suite.name, input_hash=input_hash, rows=results
        )

    def _route_items(self, chunk: Chunk, plan: _Validated, summary: GateSummary) -> None:
        cfg = self.config
        assert chunk.item_ids is not None
        passing: list[str] = []
        failing: dict[str, ItemUpdate] = {}
        results: list[ResultRow] = []
        for row, item_id in zip(chunk.frame.index, chunk.item_ids, strict=True):
            findings = plan.findings.get(int(row))
            if not findings:
                passing.append(item_id)
                continue
            failing[item_id] = self._quarantine_update(findings, item_id)
            results.append(
                ResultRow(item_id, int(row), item_id, "quarantined", [f.as_json() for f in findings], None)
            )
        self._move(passing, failing, summary)
        self.results.write(
            cfg.workflow,
            cfg.run_id,
            cfg.step,
            suite=self.suite.name,
            input_hash=summary.input_hash,
            rows=results,
        )

    def _route_of(self, findings: Sequence[RowFailure] | None, row: int, source: str) -> Route:
        """Where a new row's item goes in the write that receives it (see :meth:`_move`)."""
        if not findings:
            return self._passed  # one shared route: the ledger formats it once
        update = self._quarantine_update(findings, f"row {row} of {_short_source(source)}")
        return Route(
            Status.QUARANTINED,
            reason=update.reason,
            last_error=update.last_error,
            review_target=update.review_target,
            detail=update.detail,
        )

    @property
    def _passed_reason(self) -> str:
        return f"passed the gate (suite {self.suite.name!r})"

    @functools.cached_property
    def _passed(self) -> Route:
        return Route(self.gate_output, reason=self._passed_reason)

    def _quarantine_update(self, findings: Sequence[RowFailure], label: str) -> ItemUpdate:
        return ItemUpdate(
            reason=reason_for(findings),
            last_error=error_text(findings, row_label=label, suite=self.suite.name),
            review_target=self.gate_output,
            # Which gate found it, and in which field: a correction lands there and is validated
            # again by this gate (see conveyor.review.revalidation).
            # What a person may waive, and the contract a correction is coerced to and an approval
            # checked against (see conveyor.gate.contract): the API server has no suite file.
            detail={"gate": self.config.step, "suite": self.suite.name, "field": self.item_field,
                    "checks": recorded_checks(findings, self._waivers), "contract": self._contract},
        )

    @functools.cached_property
    def _waivers(self) -> dict[tuple[str, str | None], bool]:
        return overrides_of(self.suite)

    @functools.cached_property
    def _contract(self) -> dict[str, Any]:
        return contract_of(self.suite)

    def _move(self, passing: list[str], failing: dict[str, ItemUpdate], summary: GateSummary) -> None:
        cfg = self.config
        gate_input = self.gate_input
        if passing:
            moved = self.ledger.transition(
                cfg.workflow,
                passing,
                to_status=self.gate_output,
                actor=self.actor,
                from_status=gate_input,
                reason=self._passed_reason,
            )
            _log_not_moved(moved.not_moved, self.gate_output)
        if failing:
            moved = self.ledger.transition(
                cfg.workflow,
                failing,
                to_status=Status.QUARANTINED,
                actor=self.actor,
                from_status=gate_input,
            )
            _log_not_moved(moved.not_moved, Status.QUARANTINED)
        summary.validated += len(passing)
        summary.quarantined += len(failing)

    def _owned_by_run(self, item_ids: Sequence[str]) -> set[str]:
        """Of items already in the ledger with the same data, those this run carries; the others'
        runs are remembered (a re-sent delivery is named by the run that first received it)."""
        if not item_ids:
            return set()
        with self.ledger.connect() as conn:
            rows = item_reads.runs_of(conn, item_ids)
        owned = set()
        for item_id, run_id, created_at in rows:
            if run_id == self.config.run_id:
                owned.add(item_id)
            else:
                self._earlier[run_id] = min(created_at, self._earlier.get(run_id, created_at))
        return owned

    def _refuse_repeated_file(self, reader: SourceReader | LedgerReader) -> None:
        """An input whose bytes another run of this gate already accepted: say so before any work."""
        earlier = self.ledger.accepted_elsewhere(
            self.config.workflow, self.config.step, reader.input_hash, self.config.run_id
        )
        if earlier is None:
            return
        run_id, when, rows = earlier.run_id, earlier.at, earlier.rows
        raise RepeatedInput(
            "repeated",
            f"{_short(reader)} was already gated in run {run_id!r} on {when:%Y-%m-%d %H:%M %Z} "
            f"(the same file, sha256 {reader.input_hash[:12]}…, {rows or 'all'} rows): the feed delivered it "
            "again and this run has nothing new to process",
            detail={"earlier_run": run_id, "earlier_at": when.isoformat()},
            input_hash=reader.input_hash,
        )

    def _repeated_rows(self, summary: GateSummary) -> RepeatedInput:
        """Every row of the input was received by earlier runs: nothing is new in this one."""
        first_run, when = min(self._earlier.items(), key=lambda kv: kv[1]) if self._earlier else ("?", None)
        at = f" on {when:%Y-%m-%d %H:%M %Z}" if when else ""
        others = f" (and {len(self._earlier) - 1} other run(s))" if len(self._earlier) > 1 else ""
        changed = (
            f"; {summary.conflicts} row(s) reuse a key of those runs with other data (listed in the gate results)"
            if summary.conflicts else ""
        )
        every = "all " if not summary.conflicts else ""
        return RepeatedInput(
            "repeated",
            f"{every}{summary.already_received} rows of {_short_source(summary.source)} were already received in "
            f"run {first_run!r}{at}{others}{changed}: the feed delivered them again and this run has nothing new "
            "to process",
            detail={"earlier_runs": sorted(self._earlier), "already_received": summary.already_received},
            input_hash=summary.input_hash,
        )

    def _payloads(
        self, frame: pd.DataFrame, typed: pd.DataFrame, bad_cells: set[tuple[int, str]]
    ) -> list[dict[str, Any]]:
        """Each row as the item's payload: typed values (ISO dates, numbers), the text as read when
        a value did not parse, long text cut at ``max_cell_chars``."""
        import pandas as pd

        limit = self.config.max_cell_chars
        columns: dict[str, list[Any]] = {}
        for name in frame.columns:
            spec = self.suite.columns.get(name)
            raw = frame[name]
            if spec is None or spec.is_text:
                values = raw.astype(object).where(raw.notna(), None).tolist()
                if pd.api.types.is_string_dtype(raw.dtype):
                    lengths = raw.str.len().fillna(0)
                    for position in (lengths > limit).to_numpy().nonzero()[0]:
                        value = values[position]
                        values[position] = (
                            value[:limit] + f"… [truncated by the gate: {len(value):,} characters]"
                        )
            else:
                series = typed[name]
                if spec.kind == "date":
                    values = (
                        series.dt.strftime("%Y-%m-%d").astype(object).where(series.notna(), None).tolist()
                    )
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

    # -- batch records -----------------------------------------------------------------------

    def _record(self, summary: GateSummary, reader: SourceReader | LedgerReader, *, complete: bool) -> None:
        detail = {
            "summary": summary.as_xcom(),
            "complete": complete,
            "suite": self.suite.name,
            "as_of": self.config.as_of.isoformat(),
            "unexpected_columns": summary.unexpected_columns,
            "input": dict(reader.notes),
            "expectations": self.validator.expectation_report() if self.validator else [],
        }
        reason = None
        if summary.unexpected_columns:
            reason = f"accepted with unexpected columns: {', '.join(summary.unexpected_columns)}"
        self.ledger.record_batch(
            self.config.workflow,
            self.config.run_id,
            self.config.step,
            status="accepted",
            source=summary.source,
            input_hash=summary.input_hash,
            reason=reason,
            detail=detail,
        )

    def _record_rejection(
        self,
        summary: GateSummary,
        exc: BatchRejected,
        reader: SourceReader | LedgerReader,
        *,
        plan_report: bool = False,
    ) -> None:
        if isinstance(exc, InputChanged):
            return
        detail: dict[str, Any] = {
            "kind": exc.kind,
            **exc.detail,
            "suite": self.suite.name,
            "as_of": self.config.as_of.isoformat(),
            "input": dict(reader.notes),
        }
        if plan_report and self.validator is not None:
            detail["expectations"] = self.validator.expectation_report()
        self.ledger.record_batch(
            self.config.workflow,
            self.config.run_id,
            self.config.step,
            status="repeated" if isinstance(exc, RepeatedInput) else "quarantined",
            source=summary.source,
            input_hash=exc.input_hash or reader.input_hash or None,
            reason=exc.reason,
            detail=detail,
        )

    def _input_changed(
        self, previous: Mapping[str, Any], reader: SourceReader | LedgerReader
    ) -> InputChanged:
        when = previous.get("updated_at")
        at = f" at {when:%Y-%m-%d %H:%M %Z}" if when else ""
        return InputChanged(
            "input_changed",
            f"input changed for run {self.config.run_id!r}: the gate already accepted "
            f"{previous.get('source')} with sha256 {str(previous['input_hash'])[:12]}…{at}; "
            f"{reader.description} now hashes to {reader.input_hash[:12]}…. "
            "A run gates one input: trigger a new run for the new file",
            detail={"previous_hash": previous["input_hash"], "new_hash": reader.input_hash},
            input_hash=reader.input_hash,
        )

    def _nothing_waiting(self, summary: GateSummary, previous: Mapping[str, Any] | None) -> GateSummary:
        """Ledger mode with no item waiting: a re-run after success, or an empty run (a failure)."""
        if previous is not None and previous["status"] == "accepted":
            done = (previous.get("detail") or {}).get("summary")
            if done:
                return GateSummary.from_json({**done, "rerun": True})
        exc = BatchRejected(
            "empty",
            f"no items in status {self.gate_input!r} for run {self.config.run_id!r} of workflow "
            f"{self.config.workflow!r}: the step before the gate produced nothing",
        )
        self.ledger.record_batch(
            self.config.workflow,
            self.config.run_id,
            self.config.step,
            status="quarantined",
            source=summary.source,
            input_hash=summary.input_hash,
            reason=exc.reason,
            detail={"kind": exc.kind},
        )
        raise exc


def _columns_of(expectation: Mapping[str, Any]) -> set[str]:
    kwargs = expectation.get("kwargs", {})
    found = {kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs}
    found.update(kwargs.get("column_list") or [])
    return found


def _replace_expectations(suite: GateSuite, expectations: list[Mapping[str, Any]]) -> GateSuite:
    from dataclasses import replace

    return replace(suite, expectations=tuple(expectations))


def _trim(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {k: safe_value(v) for k, v in payload.items()}


def _plain(value: Any) -> Any:
    if is_missing(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _short(reader: SourceReader | LedgerReader) -> str:
    path = getattr(reader, "path", None)
    if reader.kind in ("csv", "jsonl", "parquet") and path is not None:
        return str(path.name)
    return reader.description


def _short_source(source: str) -> str:
    return source.rsplit("/", 1)[-1] if not source.startswith(("sql[", "ledger:")) else source[:80]


def _log_not_moved(not_moved: Mapping[str, str | None], target: str) -> None:
    if not_moved:
        sample = ", ".join(f"{k} ({v})" for k, v in list(not_moved.items())[:5])
        log.info("gate: %d items not moved to %s, already elsewhere: %s", len(not_moved), target, sample)
