"""Corrected input validated again, inside the run that quarantined it.

A reviewer's ``correct`` moves a quarantined item to ``corrected`` with its merged data. The
run's :class:`~conveyor.review.sensors.HumanReviewSensor` does not count the review done while
such items wait: the gate that quarantined them validates them again, through the one method
review knows it by (:class:`ValidatesCorrections`; the validation gate's suite, suite parameters
and reference time, rendered for this run, over the ``corrected`` items). Passing items go to the gate's output status
(``validated``), where the run's later steps pick them up; failing ones go back to
``quarantined`` with the new reason, on the queue again.

The gate is the one the quarantine recorded (``detail.gate`` of the item's move to
``quarantined``), or the one the sensor names (``revalidate=``). Its batch record and findings
are written under ``<gate>:corrections``, next to the gate's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from conveyor.errors import ReviewError
from conveyor.ledger import run_waits
from conveyor.ledger.statuses import Status

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.ledger.store import Ledger


class CorrectionCounts(Protocol):
    """What a gate made of the corrected items (a gate's summary has these and more)."""

    @property
    def validated(self) -> int: ...

    @property
    def quarantined(self) -> int: ...


@runtime_checkable
class ValidatesCorrections(Protocol):
    """A task of the DAG that validates the run's corrected items again: the validation gate
    (:meth:`conveyor.gate.operators.ValidationGateOperator.validate_corrections`). Review knows
    gates only through this: what validating means stays the gate's."""

    task_id: str

    def validate_corrections(
        self, context: Context, ledger: Ledger, *, workflow: str, run_id: str
    ) -> CorrectionCounts: ...


class RevalidationError(ReviewError, RuntimeError):
    """Corrected items cannot be validated again by this run (no such gate in its DAG)."""


def corrected_gates(ledger: Ledger, workflow: str, run_id: str) -> dict[str, str | None]:
    """Corrected items of the run waiting to be validated again -> the gate that quarantined them."""
    with ledger.connect() as conn:
        rows = run_waits.corrected_gates(conn, workflow, run_id, Status.CORRECTED)
    return {row.item_id: (row.gate.split(":", 1)[0] if row.gate else None) for row in rows}


def revalidate(
    ledger: Ledger, context: Context, *, workflow: str, run_id: str, gate: str | None = None
) -> dict[str, Any]:
    """Gate the run's corrected items again; returns ``{"corrected", "validated", "quarantined", "gate",
    "gates"}`` (``gate``: the gates' task ids as one line, ``gates``: as a list).

    :param ledger: the ledger.
    :param context: the calling task's context (the gate's templates are rendered with it).
    :param workflow: the workflow.
    :param run_id: the run carrying the items.
    :param gate: the task id of the gate to use (None: the one each quarantine recorded).
    :raises RevalidationError: no gate is known for the items, or it is not a validation gate of
        this DAG.
    """
    waiting = corrected_gates(ledger, workflow, run_id)
    if not waiting:
        return {"corrected": 0, "validated": 0, "quarantined": 0, "gate": gate, "gates": []}
    names = {gate} if gate else {g for g in waiting.values()}
    if None in names:
        # Quarantined before gates recorded themselves: the one validation gate upstream, if any.
        upstream = _upstream_gates(context)
        if len(upstream) != 1:
            unknown = sorted(i for i, g in waiting.items() if g is None)
            found = f"upstream gates: {', '.join(upstream)}" if upstream else "no validation gate is upstream"
            raise RevalidationError(
                f"corrected item(s) {', '.join(unknown[:5])} of {workflow}/{run_id} record no gate that "
                f"quarantined them and {found}: they cannot be validated again. Name the gate with "
                "HumanReviewSensor(revalidate='<gate task id>'), or reject the items"
            )
        names = (names - {None}) | set(upstream)
    validated = quarantined = 0
    for name in sorted(n for n in names if n):
        summary = _run_gate(ledger, context, workflow=workflow, run_id=run_id, step=name)
        validated += summary.validated
        quarantined += summary.quarantined
    gates = sorted(n for n in names if n)
    return {"corrected": len(waiting), "validated": validated, "quarantined": quarantined,
            "gate": ", ".join(gates), "gates": gates}  # fmt: skip


def _upstream_gates(context: Context) -> list[str]:
    """Task ids of the gates upstream of the calling task that can validate corrections."""
    task = context["ti"].task
    if getattr(task, "dag", None) is None:
        return []
    relatives = task.get_flat_relatives(upstream=True)
    return sorted(t.task_id for t in relatives if isinstance(t, ValidatesCorrections))


def _run_gate(ledger: Ledger, context: Context, *, workflow: str, run_id: str, step: str) -> CorrectionCounts:
    task = context["ti"].task
    dag = getattr(task, "dag", None)
    if dag is None or not dag.has_task(step):
        raise RevalidationError(
            f"corrected items of {workflow}/{run_id} were quarantined by the gate {step!r}, which is not a task "
            "of this DAG: they cannot be validated again here"
        )
    gate = dag.get_task(step)
    if not isinstance(gate, ValidatesCorrections):
        raise RevalidationError(
            f"task {step!r} is not a validation gate (it has no validate_corrections): it cannot validate corrections"
        )
    return gate.validate_corrections(context, ledger, workflow=workflow, run_id=run_id)


def describe(result: Mapping[str, Any]) -> str:
    """One log line: what the revalidation made of the corrected items."""
    return (
        f"{result['corrected']} corrected item(s) validated again by {result['gate']}: "
        f"{result['validated']} passed, {result['quarantined']} back to quarantined"
    )
