"""What a gate run produced: the summary (its XCom) and the row findings (``conveyor.gate_results``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from conveyor.ledger import Ledger, gate_results
from conveyor.ledger.gate_results import ResultRow as ResultRow


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
            gate_results.forget_other_inputs(conn, workflow, run_id, step, input_hash)
            if not batch:
                return 0
            return gate_results.write(conn, workflow, run_id, step, suite=suite, input_hash=input_hash, rows=batch)

    def for_run(self, workflow: str, run_id: str, step: str | None = None) -> list[dict[str, Any]]:
        """Every finding of a run (of one gate step when given), in input order."""
        with self.ledger.connect() as conn:
            return gate_results.for_run(conn, workflow, run_id, step)

    def for_item(self, item_id: str) -> list[dict[str, Any]]:
        """The findings about one item (its own row and any repeats of its key), newest first."""
        with self.ledger.connect() as conn:
            return gate_results.for_item(conn, item_id)
