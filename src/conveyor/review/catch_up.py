"""Corrected input that passes its gate again catches up with the run.

A review step late in a run (after the AI step) still waits for the run's quarantined rows, and a
reviewer may correct one there. Validated again, the row lands in the gate's output status
(``validated``), but the steps that consume that status have already run: without help it would
stay there while the run finishes green. So after a revalidation the review step runs, in
the DAG's order, every *resumable* ledger step between the gate and itself (an AI step, approval
routing, a promotion: :attr:`conveyor.ledger_step.LedgerStepOperator.resumable`) with its own
rendered settings. Each works only on the run's items still waiting in its input status, so
the corrected rows go through exactly what the other rows went through, and a doubtful AI answer
comes back to this very review step's queue.

Tasks between the gate and the review step that are not resumable (a ``@task``, an effect step)
are not run again; they are named in the log and the summary so a person can check them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context


@dataclass
class CatchUp:
    """What catching up did: each step run again with its summary, and the tasks it could not run."""

    ran: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"ran {', '.join(self.ran)} again for the corrected items" if self.ran else "no step to run again"]
        if self.skipped:
            parts.append(
                f"not resumable, so not run again (check the corrected items against them): {', '.join(self.skipped)}"
            )
        return "; ".join(parts)


def steps_between(context: Context, gates: Collection[str]) -> tuple[list[Any], list[str]]:
    """(resumable ledger steps, other tasks) strictly between the ``gates`` and the calling task,
    in the DAG's order; review sensors are neither (they wait, they do not move items)."""
    from airflow.sdk import BaseSensorOperator

    from conveyor.ledger_step import LedgerStepOperator

    me = context["ti"].task
    dag = getattr(me, "dag", None)
    if dag is None:
        return [], []
    before_me = set(me.get_flat_relative_ids(upstream=True))
    after_gates: set[str] = set()
    for gate in gates:
        if dag.has_task(gate):
            after_gates |= set(dag.get_task(gate).get_flat_relative_ids(upstream=False))
    between = before_me & after_gates
    resumable, others = [], []
    for task in dag.topological_sort():
        if task.task_id not in between or isinstance(task, BaseSensorOperator):
            continue
        if isinstance(task, LedgerStepOperator) and task.resumable:
            resumable.append(task)
        else:
            others.append(task.task_id)
    return resumable, others


def catch_up(context: Context, gates: Collection[str]) -> CatchUp:
    """Run the resumable steps between ``gates`` and the calling review step again, in order.

    :param context: the review step's context (the steps run for its run, with its identity as the
        audit actor).
    :param gates: the task ids of the gates that validated the corrected items.
    :return: what ran (step -> its summary) and what could not.
    """
    from conveyor.templated import rendered_copy

    steps, others = steps_between(context, gates)
    result = CatchUp(skipped=others)
    for step in steps:
        result.ran[step.task_id] = rendered_copy(step, context).execute(context)
    return result
