"""The gate's work, independent of Airflow: validate a batch, then route its rows in the ledger.

Two passes over the input, chunk by chunk, so memory stays bounded whatever its size:

1. **Validate** (:mod:`conveyor.gate.batch_validation`, pure). Preflight (hash, encoding,
   header), then every chunk through the typed conversion and the GX suite, then the batch-level
   checks: row count, exception rate, freshness. Any batch failure is recorded in the ledger
   (``conveyor.batches``, status ``quarantined``, with the reason) and raised as
   :class:`~conveyor.gate.errors.BatchRejected`; no item is written.
2. **Route** (:mod:`conveyor.gate.routing`). Passing items move to ``validated``, failing ones
   to ``quarantined`` with their reasons (the review queue), the findings go to
   ``conveyor.gate_results``.

Two gates, chosen once by :func:`open_gate`: a :class:`FileGate` receives a file's (an object's,
a query's) rows as new items; a :class:`LedgerGate` validates the run's items waiting in a status
(an AI step's extracted fields, a reviewer's corrections).

Idempotent: the batch record holds the input hash. The same input for the same run again is a
no-op that returns the recorded summary; another input for a run whose batch was accepted is
refused (:class:`~conveyor.gate.errors.InputChanged`). A run that crashed half-way is finished
by the next attempt (receiving is a no-op for items already there, moves are guarded by status).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, ClassVar

from conveyor.gate.batch_validation import BatchValidator, TypedChunk, ValidatedBatch, short_name
from conveyor.gate.config import LEDGER_SOURCE as LEDGER_SOURCE
from conveyor.gate.config import GateConfig
from conveyor.gate.errors import BatchRejected, InputChanged, RepeatedInput
from conveyor.gate.readers import SourceReader
from conveyor.gate.results import GateSummary
from conveyor.gate.routing import ItemRouter, RowRouter
from conveyor.gate.sources import reader_for
from conveyor.gate.suites import GateSuite, load_suite
from conveyor.ledger import Ledger
from conveyor.ledger.receiving import no_gc
from conveyor.ledger.statuses import Status

if TYPE_CHECKING:
    from conveyor.gate.batch_validation import GateInput
    from conveyor.gate.ledger_input import LedgerReader

log = logging.getLogger(__name__)


def open_gate(config: GateConfig, ledger: Ledger, *, actor: str) -> GateRunner:
    """The gate for ``config``: a :class:`LedgerGate` for ``source="ledger"``, else a :class:`FileGate`.

    :param config: the run's settings.
    :param ledger: the ledger to write to.
    :param actor: who the audit trail names (``dag.task#try``).
    """
    gate = LedgerGate if config.ledger_mode else FileGate
    return gate(config, ledger, actor=actor)


class GateRunner:
    """Runs one gate: see the module docstring. Use :func:`open_gate` to get the right one.

    :param config: the run's settings.
    :param ledger: the ledger to write to.
    :param actor: who the audit trail names (``dag.task#try``).
    """

    #: the input has a header of its own, checked before a row is parsed (see BatchValidator)
    has_header: ClassVar[bool] = True
    #: the batch's dates are judged (``max_age``)
    judges_freshness: ClassVar[bool] = True

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
        self.suite: GateSuite = load_suite(config.suite)
        self.key_column = config.key_column or self.suite.key_column
        self.validation = BatchValidator(
            self.suite,
            key_column=self.key_column,
            required=self._required(),
            freshness_column=config.freshness_column or self.suite.freshness_column,
            max_age=config.max_age if self.judges_freshness else None,
            as_of=config.as_of,
            suite_parameters=config.suite_parameters,
            max_cell_chars=config.max_cell_chars,
            min_rows=config.min_rows,
            max_exception_rate=config.max_exception_rate,
            has_header=self.has_header,
        )
        self._cleanup = ExitStack()

    def _required(self) -> list[str]:
        return list(self.config.required_columns or self.suite.required_columns)

    # -- what the two gates do differently ---------------------------------------------------------

    def _reader(self) -> GateInput:
        raise NotImplementedError

    def _before_validation(self, reader: GateInput, previous: Mapping[str, Any] | None) -> GateSummary | None:
        """Refuse the input or answer without work (a summary) before the first pass; None: go on."""
        return None

    def _judges_batch(self, plan: ValidatedBatch, previous: Mapping[str, Any] | None) -> bool:
        return True

    def _route_chunk(self, typed_chunk: TypedChunk, plan: ValidatedBatch, summary: GateSummary) -> None:
        raise NotImplementedError

    def _after_routing(self, summary: GateSummary, reader: GateInput) -> None:
        """Refuse a batch whose routing found nothing new."""

    # -- entry point ---------------------------------------------------------------------------

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
            try:
                done = self._before_validation(reader, previous)
            except BatchRejected as exc:
                self._record_rejection(summary, exc, reader)
                raise
            if done is not None:
                return done
            try:
                plan = self.validation.validate(reader)
                if self._judges_batch(plan, previous):
                    self.validation.check_batch(plan, reader)
            except BatchRejected as exc:
                self._record_rejection(summary, exc, reader, plan_report=True)
                raise
            if plan.rows == 0:  # only items can be none: a file gate refused an empty input above
                return self._nothing_waiting(summary, previous)
            summary.rows = plan.rows
            summary.unexpected_columns = plan.unexpected_columns
            summary.exception_rate = plan.exception_rate
            self._record(summary, reader, complete=False)
            self._route(reader, plan, summary)
            self._after_routing(summary, reader)
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

    def _route(self, reader: GateInput, plan: ValidatedBatch, summary: GateSummary) -> None:
        chunks: Iterable[TypedChunk]
        if plan.cached is not None:
            chunks = [plan.cached]
        else:
            if not reader.unchanged_since_preflight():
                raise BatchRejected(
                    "input_changed",
                    f"{reader.description} changed while the gate was reading it; "
                    "clear the task once the file is complete",
                )
            chunks = self.validation.typed_chunks(reader)
        with no_gc():  # a bulk pass: millions of payload dicts and rows that all live to its end
            for typed_chunk in chunks:
                self._route_chunk(typed_chunk, plan, summary)

    def _router_settings(self, item_field: str) -> dict[str, Any]:
        return {"workflow": self.config.workflow, "run_id": self.config.run_id, "step": self.config.step,
                "actor": self.actor, "suite": self.suite, "gate_input": self.gate_input,
                "gate_output": self.gate_output, "item_field": item_field}  # fmt: skip

    # -- batch records -------------------------------------------------------------------------

    def _record(self, summary: GateSummary, reader: GateInput, *, complete: bool) -> None:
        detail = {
            "summary": summary.as_xcom(),
            "complete": complete,
            "suite": self.suite.name,
            "as_of": self.config.as_of.isoformat(),
            "unexpected_columns": summary.unexpected_columns,
            "input": dict(reader.notes),
            "expectations": self.validation.expectation_report(),
        }
        reason = None
        if summary.unexpected_columns:
            reason = f"accepted with unexpected columns: {', '.join(summary.unexpected_columns)}"
        self._write_batch("accepted", summary.source, summary.input_hash, reason, detail)

    def _record_rejection(
        self, summary: GateSummary, exc: BatchRejected, reader: GateInput, *, plan_report: bool = False
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
        if plan_report and self.validation.suite_validator is not None:
            detail["expectations"] = self.validation.expectation_report()
        status = "repeated" if isinstance(exc, RepeatedInput) else "quarantined"
        self._write_batch(status, summary.source, exc.input_hash or reader.input_hash or None, exc.reason, detail)

    def _nothing_waiting(self, summary: GateSummary, previous: Mapping[str, Any] | None) -> GateSummary:
        """No item waiting: a re-run after success, or an empty run (a failure)."""
        if previous is not None and previous["status"] == "accepted":
            done = (previous.get("detail") or {}).get("summary")
            if done:
                return GateSummary.from_json({**done, "rerun": True})
        exc = BatchRejected(
            "empty",
            f"no items in status {self.gate_input!r} for run {self.config.run_id!r} of workflow "
            f"{self.config.workflow!r}: the step before the gate produced nothing",
        )
        self._write_batch("quarantined", summary.source, summary.input_hash, exc.reason, {"kind": exc.kind})
        raise exc

    def _write_batch(
        self, status: str, source: str, input_hash: str | None, reason: str | None, detail: dict[str, Any]
    ) -> None:
        """The run's one batch record for this step (``conveyor.batches``), replaced on each attempt."""
        self.ledger.record_batch(
            self.config.workflow, self.config.run_id, self.config.step, status=status, source=source,
            input_hash=input_hash, reason=reason, detail=detail,
        )  # fmt: skip


class FileGate(GateRunner):
    """Gates a file, an object or a query's rows, received as the run's new items."""

    def __init__(self, config: GateConfig, ledger: Ledger, *, actor: str) -> None:
        super().__init__(config, ledger, actor=actor)
        if not self.key_column:
            raise ValueError(f"suite {self.suite.name!r} declares no key_column; pass key_column")
        self.router = RowRouter(
            ledger,
            key_column=self.key_column,
            max_cell_chars=config.max_cell_chars,
            receives_new=self.gate_input == self.flow.first,
            **self._router_settings("payload"),
        )

    def _required(self) -> list[str]:
        required = super()._required()
        key = self.config.key_column or self.suite.key_column
        return required if not key or key in required else [key, *required]

    def _reader(self) -> SourceReader:
        cfg = self.config
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
            source, sql=cfg.sql, conn_id=cfg.conn_id, chunk_size=cfg.chunk_size, file_format=cfg.file_format,
            origin=origin,
        )  # fmt: skip

    def _before_validation(self, reader: GateInput, previous: Mapping[str, Any] | None) -> GateSummary | None:
        if previous is None or previous["status"] != "accepted":
            self._refuse_repeated_file(reader)
            return None
        if previous["input_hash"] != reader.input_hash:
            raise self._input_changed(previous, reader)
        done = (previous.get("detail") or {}).get("summary")
        if (previous.get("detail") or {}).get("complete") and done:
            log.info("gate: %s was already gated for run %s; nothing to do", reader.description, self.config.run_id)
            return GateSummary.from_json({**done, "rerun": True})
        return None

    def _route_chunk(self, typed_chunk: TypedChunk, plan: ValidatedBatch, summary: GateSummary) -> None:
        chunk, typed, bad_cells = typed_chunk
        self.router.route(chunk, typed, bad_cells, plan, summary)

    def _after_routing(self, summary: GateSummary, reader: GateInput) -> None:
        if summary.already_received and not (summary.validated or summary.quarantined):
            repeated = self.router.repeated_rows(summary)
            self._record_rejection(summary, repeated, reader)
            raise repeated

    def _refuse_repeated_file(self, reader: GateInput) -> None:
        """An input whose bytes another run of this gate already accepted: say so before any work."""
        cfg = self.config
        earlier = self.ledger.accepted_elsewhere(cfg.workflow, cfg.step, reader.input_hash, cfg.run_id)
        if earlier is None:
            return
        run_id, when, rows = earlier.run_id, earlier.at, earlier.rows
        raise RepeatedInput(
            "repeated",
            f"{short_name(reader)} was already gated in run {run_id!r} on {when:%Y-%m-%d %H:%M %Z} "
            f"(the same file, sha256 {reader.input_hash[:12]}…, {rows or 'all'} rows): the feed delivered it "
            "again and this run has nothing new to process",
            detail={"earlier_run": run_id, "earlier_at": when.isoformat()},
            input_hash=reader.input_hash,
        )

    def _input_changed(self, previous: Mapping[str, Any], reader: GateInput) -> InputChanged:
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


class LedgerGate(GateRunner):
    """Gates the run's items waiting in the gate's input status (``source="ledger"``)."""

    # Items have the fields they have, and their dates were judged when they arrived.
    has_header = False
    judges_freshness = False

    def __init__(self, config: GateConfig, ledger: Ledger, *, actor: str) -> None:
        super().__init__(config, ledger, actor=actor)
        #: the item field the gate validates: what the step before it wrote
        self.item_field = config.item_field or ("payload" if self.gate_input == self.flow.first else "ai_result")
        self.router = ItemRouter(ledger, **self._router_settings(self.item_field))

    def _reader(self) -> LedgerReader:
        from conveyor.gate.ledger_input import LedgerReader

        cfg = self.config
        return LedgerReader(
            self.ledger, cfg.workflow, cfg.run_id, self.gate_input, self.item_field, self.suite,
            chunk_size=cfg.chunk_size,
        )  # fmt: skip

    def _judges_batch(self, plan: ValidatedBatch, previous: Mapping[str, Any] | None) -> bool:
        # No items: _nothing_waiting says which. Items sent back by reviewers after the run's batch
        # passed each stand on their own: the batch's size and failure share were judged when gated.
        return plan.rows > 0 and not (previous is not None and previous["status"] == "accepted")

    def _route_chunk(self, typed_chunk: TypedChunk, plan: ValidatedBatch, summary: GateSummary) -> None:
        self.router.route(typed_chunk[0], plan, summary)
