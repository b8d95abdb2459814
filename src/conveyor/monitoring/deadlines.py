"""The deadline of a guarded workflow's run: due so long after the run was queued.

Airflow's own ``DeadlineReference.DAGRUN_QUEUED_AT`` means the same, but Airflow 3.3.2 cannot clear
a *failed* run that has such a deadline still open: ``clearTaskInstances`` with
``reset_dag_runs=true`` (the UI's "Clear" of a run, and the README's recovery) recalculates the
deadline with ``timedelta(seconds=<the stored interval>)``, and the interval is stored as a
serialized dict, so the request answers 500 (``TypeError: unsupported type for timedelta seconds
component: dict`` in ``_recalculate_dagrun_queued_at_deadlines``). That recalculation selects only
deadlines whose reference is named ``DagRunQueuedAtDeadline``; :class:`RunQueuedAt` reads the same
column under its own name, registered by Conveyor's plugin, so clears of failed runs work.

The one difference: a cleared run keeps the deadline it was given when it was first queued (the
report is still due when it was due), where Airflow would have moved it to the clear's time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk.definitions.deadline import BaseDeadlineReference


class RunQueuedAt(BaseDeadlineReference):
    """The time the run was queued (``dag_run.queued_at``), as a deadline's reference.

    Use it where you would use ``DeadlineReference.DAGRUN_QUEUED_AT``::

        DeadlineAlert(reference=RUN_QUEUED_AT, interval=timedelta(hours=2), callback=...)
    """

    #: what Airflow's scheduler passes to the evaluation
    required_kwargs = frozenset({"dag_id", "run_id"})

    def _evaluate_with(self, *, session: Any, **kwargs: Any) -> datetime | None:
        # Runs in the scheduler (core), never at DAG parse time: the imports stay here.
        from airflow.models import DagRun
        from sqlalchemy import select

        queued: datetime | None = session.scalar(
            select(DagRun.queued_at).where(DagRun.dag_id == kwargs["dag_id"], DagRun.run_id == kwargs["run_id"])
        )
        return queued


#: The reference to pass to ``DeadlineAlert(reference=...)``.
RUN_QUEUED_AT = RunQueuedAt()
