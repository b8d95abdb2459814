"""The gate's second pass: a validated batch's rows routed into the ledger, chunk by chunk.

Passing items move to the gate's output status (``validated``), failing ones to ``quarantined``
with their reasons (the review queue), and the findings go to ``conveyor.gate_results``.

- :class:`RowRouter` (a file gate): each chunk's rows are received as items in one set-based
  write that also routes them, new items inserted at their gate outcome. Items a retried task
  received before are moved, guarded by status; rows whose items another run holds are counted
  (``already_received``) or named as conflicts.
- :class:`ItemRouter` (a ledger gate): the items read are moved from the gate's input status.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.gate.batch_validation import ValidatedBatch
from conveyor.gate.contract import contract_of, overrides_of, recorded_checks
from conveyor.gate.errors import RepeatedInput
from conveyor.gate.failures import RowFailure, error_text, reason_for
from conveyor.gate.payloads import row_payloads, trimmed
from conveyor.gate.readers import Chunk
from conveyor.gate.results import GateResultStore, GateSummary, ResultRow
from conveyor.ledger import Ledger, NewItem, Route, item_reads
from conveyor.ledger.statuses import Status
from conveyor.ledger.store import ItemUpdate, item_id_for
from conveyor.ledger.values import storable
from conveyor.quarantine import GatedField, InputContract, QuarantineDetail

if TYPE_CHECKING:
    import pandas as pd

    from conveyor.gate.suites import GateSuite

log = logging.getLogger(__name__)


class Router:
    """What both gates' routing shares: the moves, the quarantine's record, the findings' write.

    :param ledger: the ledger.
    :param workflow: the workflow whose items move.
    :param run_id: the run carrying them.
    :param step: the gate's name in the quarantine's detail and the gate results.
    :param actor: who the audit trail names.
    :param suite: the gate's suite (named in reasons; its contract recorded for reviewers).
    :param gate_input: the status the gate reads.
    :param gate_output: where passing items go.
    :param item_field: the item field the gate validated (a correction lands there).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        workflow: str,
        run_id: str,
        step: str,
        actor: str,
        suite: GateSuite,
        gate_input: str,
        gate_output: str,
        item_field: str,
    ) -> None:
        self.ledger = ledger
        self.workflow = workflow
        self.run_id = run_id
        self.step = step
        self.actor = actor
        self.suite = suite
        self.gate_input = gate_input
        self.gate_output = gate_output
        self.item_field = item_field
        self.results = GateResultStore(ledger)

    @property
    def passed_reason(self) -> str:
        return f"passed the gate (suite {self.suite.name!r})"

    @functools.cached_property
    def passed(self) -> Route:
        """One shared route for passing items: the ledger formats it once."""
        return Route(self.gate_output, reason=self.passed_reason)

    def quarantine_update(self, findings: Sequence[RowFailure], label: str) -> ItemUpdate:
        return ItemUpdate(
            reason=reason_for(findings),
            last_error=error_text(findings, row_label=label, suite=self.suite.name),
            review_target=self.gate_output,
            # Which gate found it, and in which field: a correction lands there and is validated
            # again by this gate (see conveyor.review.revalidation).
            # What a person may waive, and the contract a correction is coerced to and an approval
            # checked against (see conveyor.gate.contract): the API server has no suite file.
            detail=QuarantineDetail(
                gate=self.step, suite=self.suite.name, field=self._gated_field,
                checks=recorded_checks(findings, self._waivers), contract=self._contract,
            ).as_json(),
        )  # fmt: skip

    @property
    def _gated_field(self) -> GatedField:
        return "ai_result" if self.item_field == "ai_result" else "payload"

    @functools.cached_property
    def _waivers(self) -> dict[tuple[str, str | None], bool]:
        return overrides_of(self.suite)

    @functools.cached_property
    def _contract(self) -> InputContract:
        return contract_of(self.suite)

    def move(self, passing: list[str], failing: dict[str, ItemUpdate], summary: GateSummary) -> None:
        if passing:
            moved = self.ledger.transition(
                self.workflow,
                passing,
                to_status=self.gate_output,
                actor=self.actor,
                from_status=self.gate_input,
                reason=self.passed_reason,
            )
            _log_not_moved(moved.not_moved, self.gate_output)
        if failing:
            moved = self.ledger.transition(
                self.workflow,
                failing,
                to_status=Status.QUARANTINED,
                actor=self.actor,
                from_status=self.gate_input,
            )
            _log_not_moved(moved.not_moved, Status.QUARANTINED)
        summary.validated += len(passing)
        summary.quarantined += len(failing)

    def write_results(self, summary: GateSummary, results: list[ResultRow]) -> None:
        self.results.write(
            self.workflow,
            self.run_id,
            self.step,
            suite=self.suite.name,
            input_hash=summary.input_hash,
            rows=results,
        )


class ItemRouter(Router):
    """Routes items read from the ledger (a ledger gate)."""

    def route(self, chunk: Chunk, plan: ValidatedBatch, summary: GateSummary) -> None:
        assert chunk.item_ids is not None
        passing: list[str] = []
        failing: dict[str, ItemUpdate] = {}
        results: list[ResultRow] = []
        for row, item_id in zip(chunk.frame.index, chunk.item_ids, strict=True):
            findings = plan.findings.get(int(row))
            if not findings:
                passing.append(item_id)
                continue
            failing[item_id] = self.quarantine_update(findings, item_id)
            results.append(
                ResultRow(item_id, int(row), item_id, "quarantined", [f.as_json() for f in findings], None)
            )
        self.move(passing, failing, summary)
        self.write_results(summary, results)


class RowRouter(Router):
    """Receives and routes a file's rows (a file gate).

    :param key_column: the business key column (a row without a key gets one of its position).
    :param max_cell_chars: longer text is cut in the payload.
    :param receives_new: the gate reads the workflow's first status, so new items are inserted at
        their gate outcome in the write that receives them.
    """

    def __init__(self, ledger: Ledger, *, key_column: str, max_cell_chars: int, receives_new: bool,
                 **common: Any) -> None:  # fmt: skip
        super().__init__(ledger, **common)
        self.key_column = key_column
        self.max_cell_chars = max_cell_chars
        self.receives_new = receives_new
        #: runs that received rows of this input before (run id -> when), see _owned_by_run
        self.earlier: dict[str, datetime] = {}

    def route(
        self, chunk: Chunk, typed: pd.DataFrame, bad_cells: set[tuple[int, str]], plan: ValidatedBatch,
        summary: GateSummary,
    ) -> None:  # fmt: skip
        frame = chunk.frame
        first_row = int(frame.index[0]) if len(frame) else 0
        payloads = row_payloads(frame, typed, bad_cells, self.suite, self.max_cell_chars)
        for row in plan.unstorable:
            if 0 <= row - first_row < len(payloads):
                payloads[row - first_row] = storable(payloads[row - first_row])
        # A key of NUL bytes only is no key at all (padding at the end of a file never gets here).
        keys = [None if isinstance(k, str) and k and not k.strip("\x00") else storable(k)
                for k in frame[self.key_column].tolist()]  # fmt: skip
        new_items: list[NewItem] = []
        row_of_item: dict[str, int] = {}
        routes: dict[str, Route] = {}
        flagged: set[str] = set()  # items of rows with findings
        results: list[ResultRow] = []
        source = _short_source(summary.source)
        for row, key, payload in zip(frame.index, keys, payloads, strict=True):
            row = int(row)
            if key is None or key != key or key == "":
                key = f"row-{row}@{summary.input_hash[:8]}"
            key = str(key)
            item_id = item_id_for(self.workflow, key)
            if plan.first_row_of_key.get(key, row) != row:
                summary.duplicates += 1
                found = [f.as_json() for f in plan.findings.get(row, [])]
                results.append(ResultRow(f"row {row}", row, item_id, "duplicate", found, trimmed(payload)))
                continue
            new_items.append(NewItem(business_key=key, payload=payload))
            row_of_item[item_id] = row
            findings = plan.findings.get(row)
            if findings:
                flagged.add(item_id)
            routes[item_id] = self._route_of(findings, row, source)
        # Received and routed in one write: a new item is inserted at its gate outcome, with both
        # audit rows. Items this run received before (a retried task) are moved below, guarded.
        received = self.ledger.receive(
            self.workflow,
            self.run_id,
            new_items,
            actor=self.actor,
            reason=f"read from {source}",
            routes=routes if self.receives_new else None,
        )
        routed = set(received.inserted) if self.receives_new else set()
        owned = set(received.inserted) | self._owned_by_run(received.unchanged)
        summary.already_received += len(set(received.unchanged) - owned)
        for item_id, (other_run, status) in received.conflicts.items():
            summary.conflicts += 1
            row = row_of_item[item_id]
            message = (
                f"{item_id} is already in the ledger from run {other_run!r} (status {status!r}) with "
                "different data; this row was not received"
            )
            finding = {"expectation": "conveyor_key_not_in_other_run", "column": self.key_column,
                       "value": item_id.split(":", 1)[1], "message": message}  # fmt: skip
            payload = trimmed(payloads[row - first_row])
            results.append(ResultRow(f"row {row}", row, item_id, "conflict", [finding], payload))
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
                failing[item_id] = self.quarantine_update(findings, f"row {row} of {source}")
            found = [f.as_json() for f in findings]
            payload = trimmed(payloads[row - first_row])
            results.append(ResultRow(f"row {row}", row, item_id, "quarantined", found, payload))
        self.move(passing, failing, summary)
        self.write_results(summary, results)

    def _route_of(self, findings: Sequence[RowFailure] | None, row: int, source: str) -> Route:
        """Where a new row's item goes in the write that receives it."""
        if not findings:
            return self.passed
        update = self.quarantine_update(findings, f"row {row} of {source}")
        return Route(
            Status.QUARANTINED,
            reason=update.reason,
            last_error=update.last_error,
            review_target=update.review_target,
            detail=update.detail,
        )

    def _owned_by_run(self, item_ids: Sequence[str]) -> set[str]:
        """Of items already in the ledger with the same data, those this run carries; the others'
        runs are remembered (a re-sent delivery is named by the run that first received it)."""
        if not item_ids:
            return set()
        with self.ledger.connect() as conn:
            rows = item_reads.runs_of(conn, item_ids)
        owned = set()
        for item_id, run_id, created_at in rows:
            if run_id == self.run_id:
                owned.add(item_id)
            else:
                self.earlier[run_id] = min(created_at, self.earlier.get(run_id, created_at))
        return owned

    def repeated_rows(self, summary: GateSummary) -> RepeatedInput:
        """Every row of the input was received by earlier runs: nothing is new in this one."""
        first_run, when = min(self.earlier.items(), key=lambda kv: kv[1]) if self.earlier else ("?", None)
        at = f" on {when:%Y-%m-%d %H:%M %Z}" if when else ""
        others = f" (and {len(self.earlier) - 1} other run(s))" if len(self.earlier) > 1 else ""
        changed = (
            f"; {summary.conflicts} row(s) reuse a key of those runs with other data (listed in the gate results)"
            if summary.conflicts else ""
        )  # fmt: skip
        every = "all " if not summary.conflicts else ""
        return RepeatedInput(
            "repeated",
            f"{every}{summary.already_received} rows of {_short_source(summary.source)} were already received in "
            f"run {first_run!r}{at}{others}{changed}: the feed delivered them again and this run has nothing new "
            "to process",
            detail={"earlier_runs": sorted(self.earlier), "already_received": summary.already_received},
            input_hash=summary.input_hash,
        )


def _short_source(source: str) -> str:
    return source.rsplit("/", 1)[-1] if not source.startswith(("sql[", "ledger:")) else source[:80]


def _log_not_moved(not_moved: Mapping[str, str | None], target: str) -> None:
    if not_moved:
        sample = ", ".join(f"{k} ({v})" for k, v in list(not_moved.items())[:5])
        log.info("gate: %d items not moved to %s, already elsewhere: %s", len(not_moved), target, sample)
