"""``ValidationGateOperator``: Great Expectations in front of the AI step, bad rows to the review queue."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from conveyor.gate.config import GateConfig, check_gate_settings
from conveyor.ledger_step import LedgerStepOperator

_N = TypeVar("_N", int, float)

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.gate.results import GateSummary
    from conveyor.ledger.store import Ledger
    from conveyor.workflow import Workflow


class ValidationGateOperator(LedgerStepOperator):
    """Validate a batch against a Great Expectations suite and route its rows in the item ledger.

    The input is a file (CSV, JSON lines, Parquet), the rows of a SQL query, or (``source="ledger"``)
    the run's items waiting in the workflow's gate-input status (the invoice flow validates the
    fields its AI step extracted: ``extracted -> validated | quarantined``).

    **Batch-level failures** fail the task at once, without retries (an
    :class:`~airflow.sdk.exceptions.AirflowFailException`; retrying cannot fix data): a required column
    missing or renamed (``column 'supplier_id' missing; found 'vendor_id' (similar)``), no rows or
    fewer than ``min_rows``, a file that is missing, empty, not UTF-8, delimited with something
    other than a comma, or not parseable, data older than ``max_age`` by ``freshness_column``, a
    share of failing rows above ``max_exception_rate``, or a file that differs from the one this
    run already accepted. The batch is recorded in the ledger (``conveyor.batches``, status
    ``quarantined``, with that reason) *before* the task fails, so the DAG's failure callback and
    the ``conveyor`` CLI both see why. No item is written for a rejected batch.

    **Row-level failures** (a failed expectation, a value that does not parse as its column's
    type, a repeated business key, a formula-like or oversized text cell) put the row's item in
    ``quarantined`` (the review queue), with a readable ``reason`` (every failed check with the
    offending value), a ``last_error`` listing the GX expectations, ``review_target='validated'``,
    and the full finding in ``conveyor.gate_results``. The other rows become ``validated`` items.
    Every row becomes an item in one set-based write per chunk; rows are processed in chunks of
    ``chunk_size``, two passes (validate, then route), so a million rows fit in bounded memory.

    **Formula injection** (a text cell starting with ``=``, ``@``, a tab or carriage return, or
    with ``+``/``-`` when it is not a plain number): the row is **quarantined, not neutralised**.
    The item keeps the text exactly as received so the reviewer sees what came in; anything that
    later writes ledger data into a spreadsheet format must escape such cells.

    **Extra columns** that the suite does not declare are allowed: they are kept in the items'
    payloads, checked by the injection and cell-size guards, logged, recorded in the batch record
    and listed in the summary.

    **Idempotent.** Re-running for the same run and the same input changes nothing and returns the
    recorded summary; another input for a run whose batch was accepted is refused (the batch record
    keeps the first input's hash). An attempt that died half-way is completed by the next one.

    **Re-sent deliveries.** An input another run already gated (the same file, or rows all received
    before) is named at once, with the earlier run: the task fails (``on_repeat="fail"``, the default:
    a feed that re-sends yesterday's file is broken) or is skipped (``on_repeat="skip"``), never a
    confusing failure one step later.

    The task returns (XCom) a small summary, never the data::

        {"workflow", "run_id", "step", "source", "suite", "input_hash", "rows", "validated",
         "quarantined", "duplicates", "conflicts", "already_received", "unexpected_columns",
         "exception_rate", "status": "accepted", "rerun": bool}

    Great Expectations and pandas are imported only in :meth:`execute`; importing this module costs
    no more than Airflow itself.

    :param workflow: the workflow's :class:`~conveyor.workflow.Workflow` (or its stored name).
    :param suite: suite name (``<suite>.json`` next to the DAG file or in the include folder's
        ``expectations/``), or a path to a suite JSON file. (templated)
    :param source: the input file: an object-storage URL (``s3://...``, ``file://...``; e.g. what
        :class:`~conveyor.intake.operators.SnapshotExtractOperator` returns) or a path, relative
        ones from the DAG file's folder, then the include folder; or ``"ledger"``. (templated)
    :param sql: a query whose rows are the input (instead of ``source``). (templated)
    :param conn_id: the Airflow connection of the query's Postgres database.
    :param file_format: ``csv``, ``jsonl`` or ``parquet`` when the file's extension does not say.
    :param key_column: the business key column; default: the suite's ``key_column``.
    :param required_columns: columns the input must have; default: the suite's.
    :param min_rows: the smallest acceptable number of data rows (an empty input always fails). (templated)
    :param freshness_column: date column whose rows must be recent as a whole; default: the suite's.
    :param max_age: how old the 99th percentile date may be: a ``timedelta`` or a number of days (templated;
        a rendered ``""`` or ``"none"`` skips the check); None: no check.
    :param max_exception_rate: the largest share of failing rows the batch may have (0..1). (templated)
    :param chunk_size: rows per chunk.
    :param max_cell_chars: text cells longer than this fail their row.
    :param suite_parameters: values for the suite's ``$PARAMETER`` placeholders. (templated)
    :param item_field: ledger mode: ``ai_result`` or ``payload`` (default: by the gate's status).
    :param as_of: the run's reference time for freshness and date ranges (templated); default:
        the run's data interval end, else when the run was due (``run_after``: runs triggered with
        no logical date have one too).
    :param step: the name of this gate in batch records; default: the task id.
    :param from_status: the status the gate reads (default: the workflow's gate input).
    :param to_status: where passing items go (default: ``validated``, or the chain's second status).
    :param on_repeat: ``fail`` or ``skip`` when the input was already gated in another run.
    :param ledger_conn_id: the Airflow connection of the ledger (default ``[conveyor] ledger_conn_id``).
    """

    template_fields: Sequence[str] = (
        "source",
        "sql",
        "suite",
        "suite_parameters",
        "as_of",
        "min_rows",
        "max_age",
        "max_exception_rate",
    )
    template_fields_renderers = {"sql": "sql", "suite_parameters": "json"}
    ui_color = "#fde8c8"

    def __init__(
        self,
        *,
        workflow: str | Workflow,
        suite: str,
        source: str | None = None,
        sql: str | None = None,
        conn_id: str = GateConfig.conn_id,
        file_format: str | None = None,
        key_column: str | None = None,
        required_columns: Sequence[str] | None = None,
        min_rows: int | str = GateConfig.min_rows,
        freshness_column: str | None = None,
        max_age: timedelta | int | float | str | None = None,
        max_exception_rate: float | str = GateConfig.max_exception_rate,
        chunk_size: int = GateConfig.chunk_size,
        max_cell_chars: int = GateConfig.max_cell_chars,
        suite_parameters: Mapping[str, Any] | None = None,
        item_field: str | None = None,
        as_of: str | datetime | None = None,
        step: str | None = None,
        from_status: str | None = None,
        to_status: str | None = None,
        on_repeat: str = GateConfig.on_repeat,
        ledger_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        # A DAG with a setting no run could use fails to parse, naming it (GateConfig checks the same).
        check_gate_settings(locals())
        super().__init__(workflow=workflow, ledger_conn_id=ledger_conn_id, **kwargs)
        self.suite = suite
        self.source = source
        self.sql = sql
        self.conn_id = conn_id
        self.file_format = file_format
        self.key_column = key_column
        self.required_columns = list(required_columns) if required_columns is not None else None
        self.min_rows = min_rows
        self.freshness_column = freshness_column
        self.max_age = max_age
        self.max_exception_rate = max_exception_rate
        self.chunk_size = chunk_size
        self.max_cell_chars = max_cell_chars
        self.suite_parameters = dict(suite_parameters) if suite_parameters else None
        self.item_field = item_field
        self.as_of = as_of
        self.step = step
        self.from_status = from_status
        self.to_status = to_status
        self.on_repeat = on_repeat

    def execute(self, context: Context) -> dict[str, Any]:
        from conveyor.gate.errors import BatchRejected, RepeatedInput, SuiteError
        from conveyor.gate.runner import open_gate
        from conveyor.include import dag_file_folder, searching_near
        from conveyor.ledger.actors import task_actor

        config = self.gate_config(context)
        with searching_near(dag_file_folder(context)):
            try:
                runner = open_gate(config, self.ledger(context), actor=task_actor(context))
            except SuiteError as exc:
                # A deployment problem (missing or invalid suite): retrying cannot fix it either.
                raise AirflowFailException(f"validation gate is misconfigured: {exc}") from exc
            try:
                summary = runner.run()
            except SuiteError as exc:
                raise AirflowFailException(f"validation gate is misconfigured: {exc}") from exc
            except RepeatedInput as exc:
                if self.on_repeat == "skip":
                    self.log.warning("nothing new to gate: %s", exc.reason)
                    raise AirflowSkipException(f"nothing new: {exc.reason}") from exc
                self.log.error("batch rejected (%s): %s", exc.kind, exc.reason)
                raise AirflowFailException(f"validation gate rejected the batch: {exc.reason}") from exc
            except BatchRejected as exc:
                self.log.error("batch rejected (%s): %s", exc.kind, exc.reason)
                raise AirflowFailException(f"validation gate rejected the batch: {exc.reason}") from exc
        if summary.unexpected_columns:
            self.log.warning(
                "unexpected columns (allowed, kept in the payload): %s", ", ".join(summary.unexpected_columns)
            )
        if summary.quarantined:
            self.log.warning("%d of %d rows quarantined for review", summary.quarantined, summary.rows)
        return summary.as_xcom()

    def validate_corrections(self, context: Context, ledger: Ledger, *, workflow: str, run_id: str) -> GateSummary:
        """Gate the run's corrected items again, as this gate (what review's revalidation calls).

        The settings are this task's own, rendered for the run (its file or query is not read:
        the input is the corrected items); see :meth:`GateConfig.for_corrections`.

        :param context: the calling review step's context (templates render with it; its identity
            is the audit actor).
        :param ledger: the calling step's ledger (the same database as this gate's).
        :param workflow: the workflow of the items.
        :param run_id: the run carrying them.
        """
        from conveyor.gate.runner import open_gate
        from conveyor.include import dag_file_folder, searching_near
        from conveyor.ledger.actors import task_actor
        from conveyor.templated import rendered_copy

        rendered = rendered_copy(self, context, skip=("source", "sql"))
        config = rendered.gate_config(context).for_corrections(ledger.workflow(workflow))
        if config.run_id != run_id:
            config = dataclasses.replace(config, run_id=run_id)
        with searching_near(dag_file_folder(context)):
            return open_gate(config, ledger, actor=task_actor(context)).run()

    def gate_config(self, context: Context) -> GateConfig:
        """The runner's settings from the rendered parameters and the run's context.

        A templated setting that rendered to something no run could use fails the task, naming it
        (retrying cannot fix the DAG).
        """
        try:
            return self._gate_config(context)
        except ValueError as exc:
            raise AirflowFailException(f"validation gate {self.task_id}: {exc}") from exc

    def _gate_config(self, context: Context) -> GateConfig:
        return GateConfig(
            workflow=self.workflow,
            run_id=str(context["run_id"]),
            step=self.step or self.task_id,
            suite=self.suite,
            source=self.source,
            sql=self.sql,
            conn_id=self.conn_id,
            file_format=self.file_format,
            key_column=self.key_column,
            required_columns=self.required_columns,
            min_rows=_rendered("min_rows", self.min_rows, int),
            freshness_column=self.freshness_column,
            max_age=_as_timedelta(self.max_age),
            max_exception_rate=_rendered("max_exception_rate", self.max_exception_rate, float),
            chunk_size=self.chunk_size,
            max_cell_chars=self.max_cell_chars,
            suite_parameters=self.suite_parameters,
            item_field=self.item_field,
            as_of=self._as_of(context),
            from_status=self.from_status,
            to_status=self.to_status,
            on_repeat=self.on_repeat,
        )

    def _as_of(self, context: Context) -> datetime:
        value: Any = self.as_of
        if value in (None, ""):
            dag_run = context.get("dag_run")
            # A run triggered with no logical date (REST, the UI form) has no data interval either;
            # run_after is when it was due, for every kind of run.
            value = (
                context.get("data_interval_end")
                or getattr(dag_run, "run_after", None)
                or context.get("logical_date")
                or datetime.now(UTC)
            )
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        when: datetime = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return when


def _as_timedelta(value: Any) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        if value.strip().lower() in ("", "none", "null"):
            return None
        value = float(value)
    return timedelta(days=float(value))


def _rendered(name: str, value: Any, kind: type[_N]) -> _N:
    try:
        return kind(value)
    except (TypeError, ValueError):
        article = "an" if kind is int else "a"
        raise ValueError(f"{name} must be {article} {kind.__name__}, got {value!r}") from None
