"""What a gate run produced: the summary (its XCom) and the row findings (``conveyor.gate_results``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from psycopg.rows import dict_row

from conveyor.ledger import Ledger
from conveyor.ledger.store import canonical_json


@dataclass
class GateSummary:
    """Counts per outcome of one gate run: what the task returns (its XCom), never the data.

    :param rows: data rows in the input (ledger mode: items read).
    :param validated: items that passed and are (now) ``validated``.
    :param quarantined: items that failed a row-level check and are (now) ``quarantined``.
    :param duplicates: extra rows repeating a business key already in the input (kept in the
        result table; the key's item is quarantined).
    :param conflicts: rows whose key the ledger already holds with other data (not received).
    :param already_received: rows whose key the ledger already holds, from another run, with the
        same data (nothing to do).
    :param unexpected_columns: columns the suite does not declare (allowed, reported).
    :param exception_rate: failing rows / rows.
    :param status: ``accepted`` (the batch passed) or ``quarantined``.
    :param rerun: True when this run changed nothing because the same input was already gated.
    """

    workflow: str
    run_id: str
    step: str
    source: str
    suite: str
    input_hash: str
    rows: int = 0
    validated: int = 0
    quarantined: int = 0
    duplicates: int = 0
    conflicts: int = 0
    already_received: int = 0
    unexpected_columns: list[str] = field(default_factory=list)
    exception_rate: float = 0.0
    status: str = "accepted"
    rerun: bool = False

    def as_xcom(self) -> dict[str, Any]:
        """The task's return value: counts per outcome plus a few identifiers (a few hundred bytes)."""
        data = asdict(self)
        data["unexpected_columns"] = self.unexpected_columns[:20]
        data["exception_rate"] = round(self.exception_rate, 6)
        data["source"] = self.source[:300]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GateSummary:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class ResultRow:
    """One row finding for ``conveyor.gate_results``."""

    row_key: str
    row_number: int | None
    item_id: str | None
    outcome: str
    failures: list[dict[str, Any]]
    row_data: Mapping[str, Any] | None


class GateResultStore:
    """Reads and writes ``conveyor.gate_results`` through the ledger's connection.

    :param ledger: the ledger (its database holds the table, migration 0003).
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def write(
        self, workflow: str, run_id: str, step: str, *, suite: str, input_hash: str, rows: Iterable[ResultRow]
    ) -> int:
        """Record findings (set-based). Re-writing the same finding changes nothing; findings of
        an earlier, different input of the same run and step are replaced."""
        batch = list(rows)
        with self.ledger.connect() as conn:
            conn.execute(
                "DELETE FROM conveyor.gate_results WHERE workflow = %s AND run_id = %s AND step = %s"
                " AND input_hash <> %s",
                (workflow, run_id, step, input_hash),
            )
            if not batch:
                return 0
            cur = conn.execute(
                """
                INSERT INTO conveyor.gate_results
                    (workflow, run_id, step, row_key, row_number, item_id, outcome, failures, row_data,
                     suite, input_hash)
                SELECT %(workflow)s, %(run_id)s, %(step)s, r.row_key, r.row_number, r.item_id, r.outcome,
                       r.failures::jsonb, r.row_data::jsonb, %(suite)s, %(input_hash)s
                FROM unnest(%(keys)s::text[], %(numbers)s::int[], %(items)s::text[], %(outcomes)s::text[],
                            %(failures)s::text[], %(data)s::text[])
                     AS r(row_key, row_number, item_id, outcome, failures, row_data)
                ON CONFLICT (workflow, run_id, step, row_key) DO UPDATE SET
                    row_number = EXCLUDED.row_number, item_id = EXCLUDED.item_id, outcome = EXCLUDED.outcome,
                    failures = EXCLUDED.failures, row_data = EXCLUDED.row_data, suite = EXCLUDED.suite,
                    input_hash = EXCLUDED.input_hash, created_at = now()
                WHERE (gate_results.outcome, gate_results.failures, gate_results.input_hash)
                      IS DISTINCT FROM (EXCLUDED.outcome, EXCLUDED.failures, EXCLUDED.input_hash)
                """,
                {
                    "workflow": workflow,
                    "run_id": run_id,
                    "step": step,
                    "suite": suite,
                    "input_hash": input_hash,
                    "keys": [r.row_key for r in batch],
                    "numbers": [r.row_number for r in batch],
                    "items": [r.item_id for r in batch],
                    "outcomes": [r.outcome for r in batch],
                    "failures": [canonical_json(r.failures) for r in batch],
                    "data": [None if r.row_data is None else canonical_json(r.row_data) for r in batch],
                },
            )
            return cur.rowcount

    def for_run(self, workflow: str, run_id: str, step: str | None = None) -> list[dict[str, Any]]:
        """Every finding of a run (of one gate step when given), in input order."""
        query = "SELECT * FROM conveyor.gate_results WHERE workflow = %s AND run_id = %s"
        params: list[Any] = [workflow, run_id]
        if step is not None:
            query += " AND step = %s"
            params.append(step)
        query += " ORDER BY row_number NULLS LAST, row_key"
        with self.ledger.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(query, params).fetchall())

    def for_item(self, item_id: str) -> list[dict[str, Any]]:
        """The findings about one item (its own row and any repeats of its key), newest first."""
        with self.ledger.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return list(
                cur.execute(
                    "SELECT * FROM conveyor.gate_results WHERE item_id = %s"
                    " ORDER BY created_at DESC, row_number",
                    (item_id,),
                ).fetchall()
            )
