"""What one gate run needs: the validation gate's parameters, rendered for the run.

Which gate runs is decided once from it (:func:`conveyor.gate.runner.open_gate`): a file gate for a
file, object or query, a ledger gate for the run's items in a status (``source="ledger"``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from conveyor.gate.readers import DEFAULT_CHUNK_SIZE
from conveyor.ledger.statuses import Status

if TYPE_CHECKING:
    from conveyor.workflow import Workflow

#: ``source=`` of a gate that reads the run's items from the ledger instead of a file.
LEDGER_SOURCE = "ledger"
#: The suffix of a revalidation's step name in batch records and gate results.
CORRECTIONS_SUFFIX = ":corrections"


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

    def __post_init__(self) -> None:
        check_gate_settings(vars(self))

    @property
    def ledger_mode(self) -> bool:
        """The gate reads the run's items, not a file (decided here, once, for open_gate)."""
        return (self.source or "").strip().lower() == LEDGER_SOURCE and not self.sql

    def for_corrections(self, flow: Workflow) -> GateConfig:
        """The same gate over the run's ``corrected`` items: a reviewer's corrections are input too.

        Its suite, suite parameters and reference time stay; it reads the corrected items (their
        payload, or their AI result when the gate validated the AI step's fields) instead of its file
        or query, and judges each item on its own: no batch minimum, freshness or exception rate.
        Its batch record and findings are written under ``<step>:corrections``, beside its own.
        """
        gate_input = self.from_status or flow.gate_input
        if self.ledger_mode:
            item_field = self.item_field or ("payload" if gate_input == flow.first else "ai_result")
        else:
            item_field = "payload"
        return dataclasses.replace(
            self,
            step=f"{self.step}{CORRECTIONS_SUFFIX}",
            source=LEDGER_SOURCE,
            sql=None,
            item_field=item_field,
            from_status=Status.CORRECTED,
            to_status=self.to_status or flow.gate_output,
            min_rows=1,
            max_age=None,
            max_exception_rate=1.0,  # each corrected item stands on its own
        )


def check_gate_settings(values: Mapping[str, Any]) -> None:
    """Refuse a setting no run could use, naming it: the operator calls this with its parameters
    when the DAG is parsed (a value still a template is checked once rendered), every
    :class:`GateConfig` with its fields."""
    source, sql = values["source"], values["sql"]
    if not source and not sql:
        raise ValueError("ValidationGateOperator needs source= (a file path or 'ledger') or sql=")
    if source and sql:
        raise ValueError("ValidationGateOperator takes source= or sql=, not both")
    rate, min_rows = values["max_exception_rate"], values["min_rows"]
    if not isinstance(rate, str) and not 0 <= rate <= 1:
        raise ValueError(f"max_exception_rate must be between 0 and 1, got {rate!r}")
    if not isinstance(min_rows, str) and min_rows < 1:
        raise ValueError(f"min_rows must be at least 1 (an empty input always fails), got {min_rows!r}")
    for name in ("chunk_size", "max_cell_chars"):
        if values[name] < 1:
            raise ValueError(f"{name} must be at least 1, got {values[name]!r}")
    if values["on_repeat"] not in ("fail", "skip"):
        raise ValueError(f"on_repeat must be 'fail' or 'skip', got {values['on_repeat']!r}")
